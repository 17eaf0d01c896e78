"""Fast twins of ``npformer.linear``: every position as one row of a single 2-D GEMM.

``x @ W`` on a [B, N, d_in] array runs one GEMM per batch row; reshaped to
[B*N, d_in] it is one larger GEMM, which BLAS runs faster. The bias gradient is a
matrix-vector product with a vector of ones, faster than ``.sum(axis=0)``.
"""
from __future__ import annotations

import numpy as np

from .. import linear as plain
from ..linear import LinearCache
from ..track import twin_of


@twin_of(plain.linear_forward)
def linear_forward(x, weight, bias=None):
    """Twin of ``npformer.linear.linear_forward``: one 2-D GEMM, the bias added in place."""
    d_in, d_out = weight.shape
    y = (x.reshape(-1, d_in) @ weight).reshape(x.shape[:-1] + (d_out,))
    if bias is not None:
        y += bias
    return y, LinearCache(x, weight, bias is not None)


@twin_of(plain.linear_backward)
def linear_backward(d_out, cache):
    """Twin of ``npformer.linear.linear_backward``: 2-D GEMMs, the bias gradient as ones @ dy."""
    x, weight = cache.x, cache.weight
    d_in, d_out_width = weight.shape
    x_rows, d_rows = x.reshape(-1, d_in), d_out.reshape(-1, d_out_width)
    d_weight = x_rows.T @ d_rows
    d_bias = np.ones(len(d_rows), d_rows.dtype) @ d_rows if cache.has_bias else None
    d_x = (d_rows @ weight.T).reshape(x.shape)
    return d_x, d_weight, d_bias
