"""Fast twin of ``npformer.t07_ffn``'s SwiGLU gate: SiLU(g) * u in row blocks, few temporaries."""
from __future__ import annotations

import numpy as np

from .. import t07_ffn as plain
from ..t07_ffn import GateCache
from ..t06_activations import SiluCache
from ..core.track import twin_of
from .functional import contiguous, map_rows, sigmoid_into


def _gate_into(g, u, h, gated, s):
    """s = sigmoid(g), gated = g s, h = gated u, written into h, gated and s."""
    sigmoid_into(g, s)
    np.multiply(g, s, out=gated)
    np.multiply(gated, u, out=h)


@twin_of(plain.swiglu_gate_forward)
def swiglu_gate_forward(g, u):
    """Twin of ``npformer.t07_ffn.swiglu_gate_forward``: one pass per row block, no temporaries."""
    g, u = contiguous(g), contiguous(u)
    h, gated, s = map_rows(_gate_into, [g, u], n_outputs=3)
    return h, GateCache(gated, u, SiluCache(g, s))


def _gate_backward_into(d_out, gated, u, g, s, d_g, d_u):
    """d_u = d_out gated; d_g = d_out u s (1 + g (1 - s)), written into d_g and d_u."""
    np.multiply(d_out, gated, out=d_u)
    np.subtract(1, s, out=d_g)
    d_g *= g
    d_g += 1
    d_g *= s
    d_g *= u
    d_g *= d_out


@twin_of(plain.swiglu_gate_backward)
def swiglu_gate_backward(d_out, cache):
    """Twin of ``npformer.t07_ffn.swiglu_gate_backward``: both gradients in one pass per row block."""
    silu = cache.silu
    return tuple(map_rows(_gate_backward_into, [d_out, cache.gated, cache.value, silu.x, silu.s],
                          n_outputs=2))
