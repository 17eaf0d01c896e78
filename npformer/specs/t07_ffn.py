"""The feed-forward network and SwiGLU (``t07_ffn.py``), as the engines know them.

SwiGLU as a component (its three weights arguments), its fact (position-wise), the gradient-
check cases of the FFN, the gate and SwiGLU, exercise 07 and its claim. Mistakes: ``t07_ffn.json``.
"""
from __future__ import annotations

import numpy as np

from ..t07_ffn import FFN, SwiGLU, swiglu_gate_backward, swiglu_gate_forward
from . import claims
from .draw import Example, arrays, size
from .facts import close
from .case_inputs import normal, shape
from .registry import Spec, lookup, pair

spec = Spec("t07_ffn.py")


def swiglu_forward(x, w_gate, w_up, w_down):
    """x [..., d] -> ((SiLU(x w_gate) * (x w_up)) w_down, cache); no biases."""
    d, hidden = w_gate.shape
    layer = lookup("t07_ffn.SwiGLU")(d, hidden, bias=False, rng=np.random.default_rng(0), dtype=x.dtype)
    layer.gate.weight.data[...], layer.up.weight.data[...], layer.down.weight.data[...] = w_gate, w_up, w_down
    out, cache = layer.forward(x)
    return out, (layer, cache)


def swiglu_backward(d_out, cache):
    """-> (d_x, d_w_gate, d_w_up, d_w_down)."""
    layer, inner = cache
    d_x = layer.backward(d_out, inner)
    return d_x, layer.gate.weight.grad, layer.up.weight.grad, layer.down.weight.grad


@spec.component("swiglu", "the SwiGLU feed-forward network", "swiglu_forward(x, w_gate, w_up, w_down) -> (out, cache)",
                (swiglu_forward, swiglu_backward), "(d_x, d_w_gate, d_w_up, d_w_down)",
                ("t07_ffn.SwiGLU.forward", "t07_ffn.SwiGLU.backward", "t07_ffn.swiglu_gate_forward",
                 "t07_ffn.swiglu_gate_backward"))
def swiglu_inputs(draw):
    """x [B, N, d], w_gate and w_up [d, hidden], w_down [hidden, d]."""
    B, N, d, hidden = draw(size(1, 2)), draw(size(1, 3)), draw(size(1, 3)), draw(size(1, 4))
    args = (draw(arrays((B, N, d))), draw(arrays((d, hidden))), draw(arrays((d, hidden))),
            draw(arrays((hidden, d))))
    return Example(("x", "w_gate", "w_up", "w_down"), args)


def gated_by(said):
    """The gated feed-forward network under ``said`` {"gate": "gelu" or "gelu_tanh"}: GeGLU,
    GELU(x W_gate) * (x W_up) W_down, as the GLU-variants paper (exact GELU) and Gemma (tanh)."""
    act_forward, act_backward = pair(f"t06_activations.{said['gate']}_forward",
                                     f"t06_activations.{said['gate']}_backward")
    linear_forward, linear_backward = pair("t02_linear.linear_forward", "t02_linear.linear_backward")

    def gated_forward(x, w_gate, w_up, w_down):
        g, gate = linear_forward(x, w_gate)                          # [..., hidden]
        u, up = linear_forward(x, w_up)
        a, act = act_forward(g)
        y, down = linear_forward(a * u, w_down)                      # [..., d]
        return y, (gate, up, act, a, u, down)

    def gated_backward(d_out, cache):
        gate, up, act, a, u, down = cache
        d_h, d_w_down, _ = linear_backward(d_out, down)              # y = h W_down
        d_u = d_h * a                                                # h = a u
        d_g = act_backward(d_h * u, act)                             # a = act(g)
        d_x_up, d_w_up, _ = linear_backward(d_u, up)
        d_x_gate, d_w_gate, _ = linear_backward(d_g, gate)
        return d_x_up + d_x_gate, d_w_gate, d_w_up, d_w_down
    return gated_forward, gated_backward


spec.conventions("swiglu", {"gate": ("gelu", "gelu_tanh")}, gated_by)


@spec.prop("swiglu", "position-wise: changing one position's input changes only that position's output")
def swiglu_is_position_wise(subject, example):
    x = example.args[0]
    out = subject.output(example.args, example.options)
    moved = x.copy()
    moved[..., 0, :] += 1.25
    after = subject.output((moved,) + example.args[1:], example.options)
    close("the other positions' outputs", after[..., 1:, :], out[..., 1:, :])


@spec.case("swiglu_gate")
def swiglu_gate_case(rng, size):
    B, N, d, H = shape(size)
    return (swiglu_gate_forward, swiglu_gate_backward), (2 * normal(rng, B, N, d), normal(rng, B, N, d)), {}


@spec.case("FFN")
def ffn_case(rng, size):
    B, N, d, H = shape(size)
    return FFN(d, activation=("relu", "gelu", "gelu_tanh")[size], rng=rng), (normal(rng, B, N, d),), {}


@spec.case("SwiGLU")
def swiglu_case(rng, size):
    B, N, d, H = shape(size)
    return SwiGLU(d, 3 * d, bias=size == 1, rng=rng), (normal(rng, B, N, d),), {}


spec.exercise(7, "ffn", "the feed-forward network and SwiGLU",
              "tutorial part 1, why attention needs an FFN after it; tutorial part 2 §10, what the MLP does",
              backward=("t07_ffn.py:FFN.backward", "t07_ffn.py:swiglu_gate_backward", "t07_ffn.py:SwiGLU.backward"),
              forward=("t07_ffn.py:FFN.forward", "t07_ffn.py:swiglu_gate_forward", "t07_ffn.py:SwiGLU.forward"),
              checks=(("FFN", (0, 1, 2)), ("swiglu_gate", (0, 1)), ("SwiGLU", (0, 1))), components=("swiglu",))


@spec.claim("ffn", "position-wise: the input gradient is non-zero only where d_out is")
def position_wise_gradient(L, R):
    g = claims.rng()
    for ffn in (L.t07_ffn.FFN(8, rng=g, dtype=np.float64), L.t07_ffn.SwiGLU(8, rng=g, dtype=np.float64)):
        out, cache = ffn.forward(g.standard_normal((2, 4, 8)))
        d_x = ffn.backward(claims.upstream_at(out.shape, (0, 1), g), cache)
        d_x[0, 1] = 0
        claims.zero(f"{type(ffn).__name__}: d_x away from position (0, 1)", d_x)
