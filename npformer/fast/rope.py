"""Fast twin of ``npformer.t05_rope.rotate``: the rotation as three passes over whole rows.

The plain twin works on the two halves of every pair, views whose rows are D/2 numbers long
(8 in a head of 16): numpy then runs its loop once per short row, and the overhead outweighs
the arithmetic. Here the rotated features are one block of D_rot numbers per row:

    out = x * [cos, cos] + swap(x) * [-sin, sin]       (swap: each pair's two halves exchanged)

(the "half" layout; the "interleaved" one interleaves the tables and swaps neighbours), with
the tables widened once per call, x copied once into a C-ordered array, and the products over
rows that numpy walks as one long run. a cos - b sin and a cos + b (-sin) round alike: the
numbers are the plain twin's, bit for bit. Blocks of the batch run at once on the cores.
"""
from __future__ import annotations

import numpy as np

from .. import t05_rope as plain
from ..core.track import twin_of
from .parallel import run_blocks


def _widened(cos, sin, layout, half):
    """The [..., D_rot] tables that multiply x and swap(x): [cos, cos] and [-sin, sin] (half), or
    the same interleaved."""
    cos = np.broadcast_to(cos, np.shape(cos)[:-1] + (half,)) if np.ndim(cos) else np.full(half, cos)
    sin = np.broadcast_to(sin, np.shape(sin)[:-1] + (half,)) if np.ndim(sin) else np.full(half, sin)
    axis = -1 if layout == "half" else cos.ndim
    both_cos = np.concatenate([cos, cos], -1) if axis == -1 else np.stack([cos, cos], -1)
    both_sin = np.concatenate([-sin, sin], -1) if axis == -1 else np.stack([-sin, sin], -1)
    if layout != "half":
        both_cos = both_cos.reshape(both_cos.shape[:-2] + (2 * half,))
        both_sin = both_sin.reshape(both_sin.shape[:-2] + (2 * half,))
    return both_cos, both_sin


def _swap_into(x, swapped, layout, rotated):
    """swapped = x's rotated features with each pair's two halves exchanged."""
    half = rotated // 2
    if layout == "half":
        swapped[..., :half] = x[..., half:rotated]
        swapped[..., half:] = x[..., :half]
    else:
        swapped[..., 0::2] = x[..., 1:rotated:2]
        swapped[..., 1::2] = x[..., 0:rotated:2]


def _rotate_into(x, cos_wide, sin_wide, out, layout, rotated):
    """out = x rotated (features past ``rotated`` copied), for x already C-ordered."""
    if rotated:
        turned = out[..., :rotated]
        swapped = np.empty(x.shape[:-1] + (rotated,), x.dtype)
        _swap_into(x, swapped, layout, rotated)
        np.multiply(x[..., :rotated], cos_wide, out=turned)
        swapped *= sin_wide
        turned += swapped
    out[..., rotated:] = x[..., rotated:]


@twin_of(plain.rotate)
def rotate(x, cos, sin, layout="half", rotated=None):
    """Twin of ``npformer.t05_rope.rotate``: whole rows, three passes, batch blocks over the cores."""
    rotated = x.shape[-1] if rotated is None else rotated
    plain.pairs(x, layout, rotated)                      # the layout's check, as the plain twin
    cos_wide, sin_wide = _widened(cos, sin, layout, rotated // 2)
    shape = np.broadcast_shapes(x.shape[:-1] + (rotated,), cos_wide.shape, sin_wide.shape)
    x = np.ascontiguousarray(np.broadcast_to(x, shape[:-1] + x.shape[-1:]))
    out = np.empty(x.shape, x.dtype)                   # as the plain twin: a copy of x, rotated
    if x.ndim < 2:
        _rotate_into(x, cos_wide, sin_wide, out, layout, rotated)
        return out

    def rows_of(table, s):
        """The rows of a table for batch rows ``s`` (a table without a batch axis of its own,
        or with one of size 1, serves every row)."""
        return table[s] if table.ndim == x.ndim and table.shape[0] > 1 else table

    def work(s):
        _rotate_into(x[s], rows_of(cos_wide, s), rows_of(sin_wide, s), out[s], layout, rotated)
    run_blocks(work, x.shape[0], int(np.prod(x.shape[1:])))
    return out
