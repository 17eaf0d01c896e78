"""Rotary positions (``t05_rope.py``), as the engines know them.

RoPE as a component (pairs turned by position-dependent angles, both pair layouts, positions
with an offset), the facts the article states (lengths kept, scores depend only on the
offset), the layouts as conventions, its gradient-check cases, exercise 05 and its claim.
Mistakes: ``t05_rope.json``.
"""
from __future__ import annotations

import math

import numpy as np

from ..t05_rope import Rotary
from . import claims
from .draw import Example, arrays, normal, positions, sampled, size
from .facts import close, upstream
from .case_inputs import shape
from .registry import Spec, lookup

spec = Spec("t05_rope.py")


def rope_forward(x, positions, base=10000.0, layout="half"):
    """x [B, H, N, D] with each pair of features turned by position * base^(-2i/D) -> (out, cache)."""
    layer = lookup("t05_rope.Rotary")(x.shape[-1], base, layout)
    out, cache = layer.forward(x, positions)
    return out, (layer, cache)


def rope_backward(d_out, cache):
    """-> (d_x, None): d_out turned back by the same angles."""
    layer, inner = cache
    return layer.backward(d_out, inner), None


@spec.component("rope", "rotary position embedding (pairs turned by position-dependent angles)",
                "rope_forward(x, positions, base=10000.0, layout='half') -> (out, cache)",
                (rope_forward, rope_backward), "(d_x, None)",
                ("t05_rope.Rotary.forward", "t05_rope.Rotary.backward", "t05_rope.rotate", "t05_rope.Rotary.angles"))
def rope_inputs(draw):
    """x [B, H, N, D] (D even), positions [N] or [B, N] with an offset, a base and a layout."""
    B, H, N, D = draw(size(1, 2)), draw(size(1, 2)), draw(size(1, 4)), 2 * draw(size(1, 3))
    options = {"base": draw(sampled([10000.0, 100.0])), "layout": draw(sampled(["half", "interleaved"]))}
    return Example(("x", "positions"), (draw(arrays((B, H, N, D))), positions(draw, B, N)), options)


@spec.corners("rope")
def rope_corners(rng):
    x = normal(rng, 2, 2, 3, 6)
    wide = normal(rng, 1, 2, 3, 8)                  # a quarter of it is one pair
    return [Example(("x", "positions"), (x, np.array([[0, 1, 2], [4, 5, 6]])), {"base": 100.0, "layout": layout})
            for layout in ("half", "interleaved")] + \
        [Example(("x", "positions"), (wide, np.array([2, 3, 4])), {"base": 10000.0, "layout": "half"})]


def _pairs_norms(x, layout):
    half = x.shape[-1] // 2
    a, b = (x[..., :half], x[..., half:]) if layout == "half" else (x[..., 0::2], x[..., 1::2])
    return np.hypot(a, b)


@spec.prop("rope", "a rotation keeps each pair's length")
def rope_keeps_lengths(subject, example):
    x, layout = example.args[0], example.options.get("layout", "half")
    out = subject.output(example.args, example.options)
    close("the lengths of the rotated pairs", _pairs_norms(out, layout), _pairs_norms(x, layout))


@spec.prop("rope", "scores depend only on the offset: shifting every position by 5 changes no q . k")
def rope_scores_depend_on_the_offset(subject, example):
    x, positions_ = example.args
    rotated = subject.output(example.args, example.options)
    shifted = subject.output((x, positions_ + 5), example.options)
    close("q . k after shifting every position", shifted @ shifted.swapaxes(-1, -2),
          rotated @ rotated.swapaxes(-1, -2))


@spec.prop("rope", "backward turns the gradient back by the same angles: it keeps each pair's length",
           needs_backward=True)
def rope_backward_is_a_rotation(subject, example):
    x, layout = example.args[0], example.options.get("layout", "half")
    G = upstream(x.shape)
    d_x = subject.gradients(example.args, example.options, G)[0]
    close("the lengths of the gradient's pairs", _pairs_norms(d_x, layout), _pairs_norms(G, layout))


@spec.prop("rope", "at position 1 with base 1 the first pair turns by 1 radian; its dot with the "
                   "unturned pair is cos 1 = 0.5403", drawn=False)
def rope_turns_by_the_angle(subject, example):
    x = np.array([1.0, 0.0]).reshape(1, 1, 1, 2)
    out = subject.output((x, np.array([1])), {"base": 1.0, "layout": "half"})
    close("the turned pair", out.reshape(2), [math.cos(1.0), math.sin(1.0)], 1e-12)


spec.convention("rope", {"layout": "interleaved"})
spec.convention("rope", {"layout": "half"})


def partial_rope(said):
    """RoPE turning only the first D_rot = fraction D features of each head (made even, as
    npformer's ``Rotary``), the rest passed through: GPT-NeoX's rotary_pct, Phi's partial
    rotary factor; ``said``: {"fraction": 0.5 or 0.25}. A head too narrow for one pair passes
    through whole."""
    fraction = said["fraction"]

    def partial_forward(x, positions, base=10000.0, layout="half"):
        D = x.shape[-1]
        if 2 * (int(D * fraction) // 2) == 0:
            return x.copy(), None
        layer = lookup("t05_rope.Rotary")(D, base, layout, fraction=fraction)
        out, cache = layer.forward(x, positions)
        return out, (layer, cache)

    def partial_backward(d_out, cache):
        if cache is None:
            return d_out.copy(), None
        layer, inner = cache
        return layer.backward(d_out, inner), None
    return partial_forward, partial_backward


spec.conventions("rope", {"fraction": (0.5, 0.25)}, partial_rope)
spec.capability("rope", "even_head_width")(lambda args, options: np.shape(args[0])[-1] % 2 == 0)


@spec.case("Rotary")
def rotary_case(rng, size):
    B, N, d, H = shape(size)
    layout = ("half", "interleaved", "half")[size]
    fraction = (1.0, 1.0, 0.5)[size]
    return Rotary(d, layout=layout, fraction=fraction), (normal(rng, B, H, N, d),), \
        {"positions": np.arange(3, 3 + N)}


@spec.case("Rotary (three quarters)")
def rotary_three_quarters_case(rng, size):
    B, N, d, H = shape(size)
    # D_rot = 6 of D = 8: neither the whole head nor half of it
    return Rotary(2 * d, layout="interleaved", fraction=0.75), (normal(rng, B, H, N, 2 * d),), \
        {"positions": np.arange(1, 1 + N)}


spec.exercise(5, "rope", "rotary position embedding (RoPE)",
              "tutorial part 1, how positions enter the matching; tutorial part 2 §3, why positions are needed",
              backward=("t05_rope.py:Rotary.backward",),
              forward=("t05_rope.py:Rotary.angles", "t05_rope.py:rotate"),
              checks=(("Rotary", (0, 1, 2)), ("Rotary (three quarters)", (0,)), ("MultiHeadAttention", (2,))),
              components=("rope",))


@spec.claim("rope", "features past the rotated width get the upstream gradient unchanged")
def unrotated_features_pass_the_gradient(L, R):
    g = claims.rng()
    rope = L.t05_rope.Rotary(8, fraction=0.5)
    _, cache = rope.forward(g.standard_normal((1, 2, 5, 8)), positions=np.arange(5))
    G = g.standard_normal((1, 2, 5, 8))
    claims.close("the gradient of the unrotated features", rope.backward(G, cache)[..., 4:], G[..., 4:])
