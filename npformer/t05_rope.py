"""Rotary position embedding (RoPE): rotate pairs of Q/K features by position-dependent angles.

For a pair (a, b) at position p and frequency w_i = theta^(-2i/R):
    [a, b] -> [a cos(p w_i) - b sin(p w_i),  a sin(p w_i) + b cos(p w_i)]
Then (R_i q) . (R_j k) = q . (R_{j-i} k): scores depend only on the offset j - i.

Backward: a rotation's transpose is its inverse, so the gradient is rotated back by
the same angle, -p w_i. Rotary has no parameters.

Layouts of the pairs inside a head of width D (R = rotated width, R <= D, even):
- ``"half"``: feature i pairs with i + R/2 (Llama-family checkpoints);
- ``"interleaved"``: feature 2i pairs with 2i + 1 (the RoFormer paper).
Features past R (``fraction < 1``) pass through unrotated.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .core.module import Cache, Module
from .core.track import fast_twin
from .core.validate import check_choice


LAYOUTS = ("half", "interleaved")


def pairs(x, layout, rotated):
    """The two halves (a, b) of every rotated pair in the last axis of x (views)."""
    check_choice("layout", layout, LAYOUTS)
    if layout == "half":
        return x[..., : rotated // 2], x[..., rotated // 2: rotated]
    return x[..., 0:rotated:2], x[..., 1:rotated:2]


@fast_twin
def rotate(x, cos, sin, layout="half", rotated=None):
    """Each pair (a, b) of x [..., D] turned by its angle: (a cos - b sin, a sin + b cos).

    ``cos``, ``sin`` [..., R/2] broadcast against the pairs; features past ``rotated``
    (default: all of D) pass through unchanged.
    """
    rotated = x.shape[-1] if rotated is None else rotated
    a, b = pairs(x, layout, rotated)
    out = x.copy()                          # features past R pass through unrotated
    out_a, out_b = pairs(out, layout, rotated)
    out_a[...] = a * cos - b * sin
    out_b[...] = a * sin + b * cos
    return out


@dataclass(frozen=True)
class RopeCache(Cache):
    """The cos and sin tables of the angles used."""

    cos: np.ndarray
    sin: np.ndarray


class Rotary(Module):
    """Applies RoPE to x [B, H, N, D] at integer positions [N] or [B, N]; no parameters."""

    LAYOUTS = LAYOUTS

    def __init__(self, head_dim, theta=10000.0, layout="half", fraction=1.0):
        rotated = 2 * (int(head_dim * fraction) // 2)          # pairs: an even count
        check_choice("layout", layout, LAYOUTS)
        if rotated < 2:
            raise ValueError(f"fraction: rotates {rotated} features of head_dim {head_dim}; need at least 2")
        self.head_dim, self.theta, self.layout, self.rotated = head_dim, theta, layout, rotated

    def angles(self, positions):
        """p * w_i for each position and pair: [..., N, R/2] in float64."""
        w = self.theta ** (-np.arange(0, self.rotated, 2) / self.rotated)     # [R/2]
        return np.asarray(positions, dtype=np.float64)[..., None] * w

    def tables(self, positions, dtype):
        """cos and sin [N, R/2] (positions [N]) or [B, 1, N, R/2] (positions [B, N])."""
        angle = self.angles(positions)
        if angle.ndim == 3:
            angle = angle[:, None]              # broadcast over heads
        return np.cos(angle).astype(dtype), np.sin(angle).astype(dtype)

    def forward(self, x, positions):
        """x [B, H, N, D] rotated at ``positions`` [N] or [B, N] -> (out, cache)."""
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"x: expected head width {self.head_dim}, got shape {x.shape}")
        cos, sin = self.tables(positions, x.dtype)
        return rotate(x, cos, sin, self.layout, self.rotated), RopeCache(cos, sin)

    def backward(self, d_out, cache):
        # forward: out = R(angle) x; R^T = R(-angle), so d_x = R(-angle) d_out
        """d_x: d_out rotated back by the same angles."""
        return rotate(d_out, cache.cos, -cache.sin, self.layout, self.rotated)
