"""Fast twins of ``npformer.t02_linear``: every position as one row of 2-D GEMMs, split over cores.

``x @ W`` on a [B, N, d_in] array runs one GEMM per batch row; reshaped to [B*N, d_in]
it is one larger GEMM, which BLAS runs faster. With several cores the rows of the output
(and of dW) are cut into blocks computed at once (``parallel.run_blocks``), each product
written straight into its place with ``out=``. The bias gradient is a matrix-vector
product with a vector of ones, faster than ``.sum(axis=0)``. dW is laid out like W: a
transposed W (the tied head's E^T) gets a transposed dW, so the caller's ``grad += dW.T``
reads memory in order.
"""
from __future__ import annotations

import math

import numpy as np

from .. import t02_linear as plain
from ..t02_linear import LinearCache
from ..core.track import twin_of
from .functional import ones
from .parallel import blocks, run_blocks


@twin_of(plain.linear_forward)
def linear_forward(x, weight, bias=None):
    """Twin of ``npformer.t02_linear.linear_forward``: one 2-D GEMM in row blocks, the bias in place."""
    d_in, d_out = weight.shape
    rows = x.reshape(math.prod(x.shape[:-1]), d_in)           # a copy when x is not contiguous
    y = np.empty((len(rows), d_out), np.result_type(x, weight))
    parts = blocks(len(rows), d_in * d_out // 32)
    if len(parts) == 1:
        np.matmul(rows, weight, out=y)
        if bias is not None:
            y += bias
    else:
        def work(s):
            np.matmul(rows[s], weight, out=y[s])
            if bias is not None:
                y[s] += bias
        run_blocks(work, len(rows), d_in * d_out // 32)
    return y.reshape(x.shape[:-1] + (d_out,)), LinearCache(x, weight, bias is not None)


def _weight_gradient(x_rows, d_rows, weight):
    """x^T d_y [d_in, d_out], in W's own layout (a transposed W gets a transposed result)."""
    d_in, width = weight.shape
    if weight.flags.f_contiguous and not weight.flags.c_contiguous:
        d_weight_t = np.empty((width, d_in), d_rows.dtype)     # (x^T d_y)^T = d_y^T x
        run_blocks(lambda s: np.matmul(d_rows[:, s].T, x_rows, out=d_weight_t[s]), width,
                   len(d_rows) * d_in // 32)
        return d_weight_t.T
    d_weight = np.empty((d_in, width), d_rows.dtype)
    run_blocks(lambda s: np.matmul(x_rows[:, s].T, d_rows, out=d_weight[s]), d_in,
               len(d_rows) * width // 32)
    return d_weight


@twin_of(plain.linear_backward)
def linear_backward(d_out, cache):
    """Twin of ``npformer.t02_linear.linear_backward``: 2-D GEMMs in blocks, the bias gradient as ones @ dy."""
    x, weight = cache.x, cache.weight
    d_in, width = weight.shape
    x_rows = x.reshape(math.prod(x.shape[:-1]), d_in)
    d_rows = d_out.reshape(math.prod(d_out.shape[:-1]), width)
    d_x = np.empty((len(d_rows), d_in), d_rows.dtype)
    parts = blocks(len(d_rows), d_in * width // 32)
    if len(parts) == 1:
        np.matmul(d_rows, weight.T, out=d_x)
    else:
        run_blocks(lambda s: np.matmul(d_rows[s], weight.T, out=d_x[s]), len(d_rows), d_in * width // 32)
    d_weight = _weight_gradient(x_rows, d_rows, weight)
    d_bias = ones(len(d_rows), d_rows.dtype) @ d_rows if cache.has_bias else None
    return d_x.reshape(x.shape), d_weight, d_bias
