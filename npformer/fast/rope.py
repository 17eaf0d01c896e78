"""Fast twin of ``npformer.t05_rope.rotate``: the rotation written straight into its output, in
blocks of the batch computed at once on the cores."""
from __future__ import annotations

import numpy as np

from .. import t05_rope as plain
from ..t05_rope import pairs
from ..core.track import twin_of
from .parallel import run_blocks


def _rotate_into(x, cos, sin, out, layout, rotated):
    a, b = pairs(x, layout, rotated)
    out_a, out_b = pairs(out, layout, rotated)
    np.multiply(a, cos, out=out_a)
    out_a -= b * sin
    np.multiply(a, sin, out=out_b)
    out_b += b * cos
    out[..., rotated:] = x[..., rotated:]


@twin_of(plain.rotate)
def rotate(x, cos, sin, layout="half", rotated=None):
    """Twin of ``npformer.t05_rope.rotate``: no copy of x first, batch blocks over the cores."""
    rotated = x.shape[-1] if rotated is None else rotated
    out = np.empty(x.shape, x.dtype)
    if x.ndim < 2:
        _rotate_into(x, cos, sin, out, layout, rotated)
        return out

    def rows_of(table, s):
        """The rows of a cos or sin table for batch rows ``s`` (a table without a batch axis
        of its own, or with one of size 1, serves every row)."""
        return table[s] if table.ndim == x.ndim and table.shape[0] > 1 else table

    def work(s):
        _rotate_into(x[s], rows_of(cos, s), rows_of(sin, s), out[s], layout, rotated)
    run_blocks(work, x.shape[0], int(np.prod(x.shape[1:])))
    return out
