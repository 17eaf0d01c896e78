"""Rotary position embedding (RoPE): rotate pairs of Q/K features by angles that grow with the position.

The article turns a pair [a, b] by an angle θ:

    [a, b] -> [a cos θ - b sin θ,  a sin θ + b cos θ]

and writes R_i for the rotation at position i, so that (R_i q)^T (R_j k) = q^T R_{j-i} k:
a score depends on the offset j - i, not on where the two positions are.

Here, in a head of width D, the first D_rot features (D_rot <= D, even) form D_rot / 2
pairs, and pair c at position p turns by its own angle

    θ = p w_c,   w_c = base^(-2c / D_rot),   c = 0 .. D_rot/2 - 1

    article          code
    θ (an angle)     ``Rotary.angles(positions)``: p w_c for every position and pair
    (the base)       ``Rotary(base=10000)``; configs keep Hugging Face's field name ``rope_theta``
    R_i (a matrix)   the turn at position i (R_p below): its cos θ and sin θ tables (``RopeCache``)
    D_rot (a width)  ``rotated``: how many features are rotated, ``fraction * D`` made even

Backward: a rotation's transpose is its inverse (R_i^T turns by -θ), so the gradient is
turned back by the same angle. Rotary has no parameters.

Layouts of the pairs inside a head:
- ``"half"``: feature c pairs with c + D_rot/2 (Llama-family checkpoints);
- ``"interleaved"``: feature 2c pairs with 2c + 1 (the RoFormer paper).
Features past D_rot (``fraction < 1``) pass through unrotated.

Fast twin: ``rotate`` has a drop-in twin in ``npformer/fast/rope.py``, which runs only under
``npformer.track("fast")``. By default the function written here runs: a ``print`` in it shows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .core.module import Cache, Module
from .core.track import fast_twin
from .core.validate import check_choice, check_eps, check_positive


LAYOUTS = ("half", "interleaved")


def pairs(x, layout, rotated):
    """The two halves (a, b) of every rotated pair in the last axis of x (views)."""
    check_choice("layout", layout, LAYOUTS)
    if layout == "half":
        return x[..., : rotated // 2], x[..., rotated // 2: rotated]
    return x[..., 0:rotated:2], x[..., 1:rotated:2]


@fast_twin
def rotate(x, cos, sin, layout="half", rotated=None):
    """Each pair (a, b) of x [..., D] turned by its angle θ: (a cos θ - b sin θ, a sin θ + b cos θ).

    ``cos``, ``sin`` [..., D_rot/2] broadcast against the pairs; features past ``rotated``
    (D_rot, default: all of D) pass through unchanged.
    """
    rotated = x.shape[-1] if rotated is None else rotated
    a, b = pairs(x, layout, rotated)
    out = x.copy()                          # features past D_rot pass through unrotated
    out_a, out_b = pairs(out, layout, rotated)
    out_a[...] = a * cos - b * sin
    out_b[...] = a * sin + b * cos
    return out


@dataclass(frozen=True)
class RopeCache(Cache):
    """cos θ and sin θ of the angles used: the rotation R_p at each position."""

    cos: np.ndarray
    sin: np.ndarray


class Rotary(Module):
    """Applies RoPE to x [B, H, N, D] at integer positions [N] or [B, N]; no parameters.

    ``base``: the number whose powers give the pairs' frequencies, w_c = base^(-2c / D_rot)
    (10000 in the RoFormer paper and Llama; a config's ``rope_theta``). ``fraction``: the
    share of D that is rotated (D_rot = ``rotated``).
    """

    LAYOUTS = LAYOUTS

    def __init__(self, head_dim, base=10000.0, layout="half", fraction=1.0):
        check_positive("head_dim", head_dim)
        check_eps("base", base)
        if not (isinstance(fraction, (int, float)) and 0 < fraction <= 1):
            raise ValueError(f"fraction: expected a number in (0, 1] (the share of each head "
                             f"rotated), got {fraction!r}")
        rotated = 2 * (int(head_dim * fraction) // 2)          # D_rot: pairs, an even count
        check_choice("layout", layout, LAYOUTS)
        if rotated < 2:
            raise ValueError(f"fraction: rotates {rotated} features of head_dim {head_dim}; "
                             f"need at least 2")
        self.head_dim, self.base, self.layout, self.rotated = head_dim, base, layout, rotated

    def angles(self, positions):
        """The article's θ = p w_c for each position p and pair c: [..., N, D_rot/2] in float64."""
        w = self.base ** (-np.arange(0, self.rotated, 2) / self.rotated)      # w_c: [D_rot/2]
        return np.asarray(positions, dtype=np.float64)[..., None] * w

    def tables(self, positions, dtype):
        """cos θ and sin θ: [N, D_rot/2] (positions [N]) or [B, 1, N, D_rot/2] (positions [B, N])."""
        theta = self.angles(positions)
        if theta.ndim == 3:
            theta = theta[:, None]              # broadcast over heads
        return np.cos(theta).astype(dtype), np.sin(theta).astype(dtype)

    def forward(self, x, positions):
        """x [B, H, N, D] rotated at ``positions`` [N] or [B, N] -> (out, cache)."""
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"x: expected head width {self.head_dim}, got shape {x.shape}")
        cos, sin = self.tables(positions, x.dtype)
        return rotate(x, cos, sin, self.layout, self.rotated), RopeCache(cos, sin)

    def backward(self, d_out, cache):
        """d_x: d_out rotated back by the same angles."""
        # forward: out = R_p x, the turn by θ; R_p^T turns by -θ (cos stays, sin flips sign)
        return rotate(d_out, cache.cos, -cache.sin, self.layout, self.rotated)
