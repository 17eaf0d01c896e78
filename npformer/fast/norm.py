"""Fast twins of ``npformer.t08_norm``: LayerNorm and RMSNorm with few temporaries, rows split over cores.

The centred input is computed once and becomes xhat in place; the row statistics come
from einsum; the gain and shift gradients are sums over every position, written as a
matrix-vector product with a vector of ones (BLAS), one partial sum per row block.
"""
from __future__ import annotations

import numpy as np

from .. import t08_norm as plain
from ..t08_norm import NormCache
from ..core.track import twin_of
from .functional import as_rows, contiguous
from .parallel import run_blocks


def _normalise(x, eps, centre):
    """(xhat, rstd [rows, 1]) of x [..., d], rows split over the cores."""
    x = contiguous(x)
    xhat = np.empty(x.shape, x.dtype)                    # C order: its rows are views
    x_rows, xhat_rows = as_rows(x), as_rows(xhat)
    rstd = np.empty((len(x_rows), 1), x.dtype)
    width, eps = x.dtype.type(x.shape[-1]), x.dtype.type(eps)

    def work(s):
        out = xhat_rows[s]
        if centre:
            np.subtract(x_rows[s], x_rows[s].mean(axis=-1, keepdims=True), out=out)
        else:
            out[...] = x_rows[s]
        square = np.einsum("ij,ij->i", out, out)[:, None]
        np.sqrt(square / width + eps, out=rstd[s])
        np.reciprocal(rstd[s], out=rstd[s])
        out *= rstd[s]
    run_blocks(work, len(x_rows), x_rows.shape[1])
    return xhat, rstd.reshape(x.shape[:-1] + (1,))


@twin_of(plain.layernorm_forward)
def layernorm_forward(x, gamma, beta, eps=1e-5):
    """Twin of ``npformer.t08_norm.layernorm_forward``: the centred input becomes xhat in place."""
    xhat, rstd = _normalise(x, eps, centre=True)
    y = xhat * gamma
    y += beta
    return y, NormCache(xhat, rstd, gamma)


@twin_of(plain.rmsnorm_forward)
def rmsnorm_forward(x, gamma, eps=1e-6):
    """Twin of ``npformer.t08_norm.rmsnorm_forward``: the mean square by einsum."""
    xhat, rstd = _normalise(x, eps, centre=False)
    return xhat * gamma, NormCache(xhat, rstd, gamma)


def _norm_backward(d_out, cache, centre):
    """(d_x, d_gamma, d_beta) of either norm, rows split over the cores."""
    # a plain forward's cache may hold xhat in any layout (that of its input): read C-ordered
    # copies, and write d_x into an array made here, whose rows are views
    xhat, gamma = contiguous(cache.xhat), cache.gamma
    rstd = contiguous(np.broadcast_to(cache.rstd, xhat.shape[:-1] + (1,)))
    d_out = contiguous(np.broadcast_to(d_out, xhat.shape))
    d_x = np.empty(xhat.shape, xhat.dtype)
    rows = [as_rows(a) for a in (xhat, rstd, d_out, d_x)]
    width = xhat.dtype.type(xhat.shape[-1])

    def work(s):
        xhat_s, rstd_s, d_out_s, g = (a[s] for a in rows)
        d_gamma = np.ones(len(d_out_s), xhat.dtype) @ (d_out_s * xhat_s)
        d_beta = np.ones(len(d_out_s), xhat.dtype) @ d_out_s
        np.multiply(d_out_s, gamma, out=g)
        gx_mean = np.einsum("ij,ij->i", g, xhat_s)[:, None] / width
        if centre:
            g -= g.sum(axis=-1, keepdims=True) / width
        g -= xhat_s * gx_mean
        g *= rstd_s
        return d_gamma, d_beta
    parts = run_blocks(work, len(rows[0]), rows[0].shape[1])
    d_gamma = sum(p[0] for p in parts)
    d_beta = sum(p[1] for p in parts)
    return d_x, d_gamma, d_beta


@twin_of(plain.layernorm_backward)
def layernorm_backward(d_out, cache):
    """Twin of ``npformer.t08_norm.layernorm_backward``: row sums by BLAS, corrections in place."""
    return _norm_backward(d_out, cache, centre=True)


@twin_of(plain.rmsnorm_backward)
def rmsnorm_backward(d_out, cache):
    """Twin of ``npformer.t08_norm.rmsnorm_backward``: row sums by BLAS, corrections in place."""
    d_x, d_gamma, _ = _norm_backward(d_out, cache, centre=False)
    return d_x, d_gamma
