"""The gate and the residual: 3 x 0.2 = 0.6, and [2, 1] + [0.1, -0.2] = [2.1, 0.8].

SwiGLU has two branches: one carries a value (here 3), the other passes
through SiLU and scales it (here a coefficient of 0.2); their product, 0.6,
goes on. The weights of npformer's SwiGLU are set so the branches give exactly
those numbers. A residual connection y = x + f(x) adds a sublayer's correction
to its input, and its gradient reaches x even when f passes none back.
"""
import numpy as np
from scipy.optimize import brentq

from npformer import Linear, SwiGLU, silu_forward
from npformer.worked import vec


def silu(g):
    """SiLU(g) = g * sigmoid(g), npformer's forward."""
    return float(silu_forward(np.array(g))[0])


def run(out=print):
    out("1. The gate in SwiGLU: (SiLU(x W_gate) * x W_up) W_down, width 1, input x = [1]")
    gate_pre = brentq(lambda g: silu(g) - 0.2, 0.0, 1.0)         # the W_gate whose SiLU is 0.2
    swiglu = SwiGLU(d=1, hidden=1, rng=np.random.default_rng(0), dtype=np.float64)
    swiglu.up.weight.data[...] = 3.0          # the value branch: 1 x 3 = 3
    swiglu.gate.weight.data[...] = gate_pre   # the gate branch before SiLU
    swiglu.down.weight.data[...] = 1.0        # pass the product through unchanged
    y, cache = swiglu.forward(np.array([1.0]))
    value, gate = float(cache.value[0]), float(cache.gated[0])
    out(f"   value branch x W_up = {value:.1f}")
    out(f"   gate branch SiLU(x W_gate) = SiLU({gate_pre:.4f}) = {gate:.1f}")
    out(f"   product {value:.1f} x {gate:.1f} = {float(y[0]):.1f}")
    samples = np.array([-4.0, -1.0, 0.0, 1.0, 4.0])
    out(f"   SiLU at {vec(samples, 0)} = {vec(silu_forward(samples)[0])}: "
        f"a soft coefficient, not a 0/1 switch")

    out("2. The residual y = x + f(x), with a sublayer f whose output is [0.1, -0.2]")
    sublayer = Linear(2, 2, rng=np.random.default_rng(0), dtype=np.float64)
    sublayer.weight.data[...] = 0.0                   # f ignores x and returns its bias
    sublayer.bias.data[...] = [0.1, -0.2]
    x = np.array([2.0, 1.0])
    correction, f_cache = sublayer.forward(x)
    residual = x + correction
    out(f"   x = {vec(x, 0)}, f(x) = {vec(correction, 1)}, x + f(x) = {vec(residual, 1)}")
    d_y = np.array([1.0, -0.5])
    d_x = d_y + sublayer.backward(d_y, f_cache)       # the direct path plus f's own gradient
    out(f"   backward: a gradient {vec(d_y, 1)} at y reaches x as {vec(d_x, 1)} although "
        f"f passes nothing back (its weight is 0): the direct path")
    return {"value": value, "gate": gate, "gated_output": float(y[0]), "residual": residual,
            "correction": correction, "residual_grad": d_x, "upstream_grad": d_y}


if __name__ == "__main__":
    run()
