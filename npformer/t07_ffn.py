"""Position-wise feed-forward networks: the same small network applied to every position alone.

The article's FFN, then a gated variant:

    FFN(x)    = act(x W1 + b1) W2 + b2              (act: ReLU, GELU or its tanh form)
    SwiGLU(x) = (SiLU(x W_gate) * (x W_up)) W_down  (Llama-style: one branch gates the other)

Without the activation the two projections would collapse into one: x W1 W2.

Backward of FFN, with h = x W1 + b1 and a = act(h) (``d_x`` means dL/dx):
    d_a = d_y W2^T;   d_h = d_a * act'(h);   d_x = d_h W1^T
Backward of SwiGLU, with s = SiLU(x W_gate), u = x W_up and h = s * u (the gate):
    d_h = d_y W_down^T;   d_s = d_h * u;   d_u = d_h * s
and x receives the sum of what its two projections send back.

Fast twins: ``swiglu_gate_forward`` and ``swiglu_gate_backward`` have drop-in twins in
``npformer/fast/ffn.py``, which run only under ``npformer.track("fast")``. By default the
functions written here run: a ``print`` in them shows. (The projections are ``Linear``s,
whose own twins are named in ``t02_linear.py``.)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .t06_activations import ACTIVATIONS, silu_backward, silu_forward
from .t02_linear import Linear
from .core.module import Cache, Module
from .core.track import fast_twin
from .core.validate import check_choice, check_positive, check_rng


@dataclass(frozen=True)
class FFNCache(Cache):
    """The caches of the two projections and of the activation."""

    up: Cache
    act: Cache
    down: Cache


class FFN(Module):
    """x [..., d] -> act(x W1 + b1) W2 + b2 [..., d], hidden width ``hidden`` (default ``mult * d``).

    ``up`` is W1, ``down`` is W2. ``rng``: the Generator the weights are drawn from (None:
    ``np.random.default_rng(0)``).
    """

    def __init__(self, d, hidden=None, mult=4, activation="gelu", bias=True, rng=None,
                 dtype=np.float32, out_std=None):
        self.activation = check_choice("activation", activation, sorted(ACTIVATIONS))
        check_positive("d", d)
        hidden = check_positive("mult", mult) * d if hidden is None else check_positive("hidden", hidden)
        rng = check_rng(rng)
        self.up = Linear(d, hidden, bias, rng, dtype=dtype)
        self.down = Linear(hidden, d, bias, rng, std=out_std, dtype=dtype)

    def forward(self, x):
        """x [..., d] -> (y [..., d], cache); each position is computed alone."""
        act_forward, _ = ACTIVATIONS[self.activation]
        h, up = self.up.forward(x)                 # h = x W1 + b1: [..., hidden]
        a, act = act_forward(h)                    # a = act(h)
        y, down = self.down.forward(a)             # y = a W2 + b2: [..., d]
        return y, FFNCache(up, act, down)

    def backward(self, d_out, cache):
        """d_x from d_out, through W2, the activation and W1."""
        _, act_backward = ACTIVATIONS[self.activation]
        d_a = self.down.backward(d_out, cache.down)          # forward: y = a W2 + b2
        d_h = act_backward(d_a, cache.act)                   # forward: a = act(h)
        return self.up.backward(d_h, cache.up)               # forward: h = x W1 + b1


@dataclass(frozen=True)
class GateCache(Cache):
    """What the gate's backward needs: SiLU(g), u and SiLU's cache."""

    gated: np.ndarray    # SiLU(g)
    value: np.ndarray    # u
    silu: Cache


@fast_twin
def swiglu_gate_forward(g, u):
    """The gate of SwiGLU: h = SiLU(g) * u, the value u scaled by SiLU of the gate input g."""
    gated, silu = silu_forward(g)
    return gated * u, GateCache(gated, u, silu)


@fast_twin
def swiglu_gate_backward(d_out, cache):
    """-> (d_g, d_u)."""
    d_u = d_out * cache.gated                               # forward: h = gated * u
    d_g = silu_backward(d_out * cache.value, cache.silu)    # forward: gated = SiLU(g)
    return d_g, d_u


@dataclass(frozen=True)
class SwiGLUCache(Cache):
    """The caches of the three projections and of the gate."""

    gate: Cache
    up: Cache
    glu: GateCache       # .gated = SiLU(x W_gate), .value = x W_up
    down: Cache

    @property
    def gated(self):
        """SiLU(x W_gate)."""
        return self.glu.gated

    @property
    def value(self):
        """x W_up."""
        return self.glu.value


class SwiGLU(Module):
    """x [..., d] -> (SiLU(x W_gate) * x W_up) W_down, hidden width ``hidden`` (default 4 d).

    ``rng``: the Generator the weights are drawn from (None: ``np.random.default_rng(0)``).
    """

    def __init__(self, d, hidden=None, bias=False, rng=None, dtype=np.float32, out_std=None):
        check_positive("d", d)
        hidden = 4 * d if hidden is None else check_positive("hidden", hidden)
        rng = check_rng(rng)
        self.gate = Linear(d, hidden, bias, rng, dtype=dtype)
        self.up = Linear(d, hidden, bias, rng, dtype=dtype)
        self.down = Linear(hidden, d, bias, rng, std=out_std, dtype=dtype)

    def forward(self, x):
        """x [..., d] -> (y [..., d], cache); position-wise like ``FFN``."""
        g, gate = self.gate.forward(x)                       # [..., hidden]
        value, up = self.up.forward(x)
        h, glu = swiglu_gate_forward(g, value)               # SiLU(g) * value
        y, down = self.down.forward(h)                       # [..., d]
        return y, SwiGLUCache(gate, up, glu, down)

    def backward(self, d_out, cache):
        """d_x from d_out, through W_down, the gate and both projections."""
        d_h = self.down.backward(d_out, cache.down)          # forward: y = h W_down
        d_g, d_value = swiglu_gate_backward(d_h, cache.glu)  # forward: h = SiLU(g) * value
        d_x_up = self.up.backward(d_value, cache.up)         # forward: value = x W_up
        d_x_gate = self.gate.backward(d_g, cache.gate)       # forward: g = x W_gate
        return d_x_up + d_x_gate                             # x feeds both projections
