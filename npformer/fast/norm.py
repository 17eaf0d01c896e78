"""Fast twins of ``npformer.t08_norm``: LayerNorm and RMSNorm with few temporaries, rows split over cores.

The centred input is computed once and becomes xhat in place. numpy's reductions along a
short last axis pay a fixed cost per row, several times the arithmetic: every row dot
product here is a ``vecdot``, and the gain and shift gradients, sums over every position,
are matrix-vector products with a vector of ones (BLAS), one partial sum per row block.
The row means stay numpy's own sums, as the plain twin takes them: on a constant row
x - mean is the rounding of the mean, which 1 / sqrt(eps) then magnifies, so a mean
summed in another order would give another xhat.
"""
from __future__ import annotations

import math

import numpy as np

from .. import t08_norm as plain
from ..t08_norm import NormCache
from ..core.track import twin_of
from .functional import as_rows, contiguous, ones
from .parallel import blocks, run_parts


def _normalise_rows(x, xhat, rstd, eps, centre):
    """xhat = (x - mean) * rstd (RMSNorm: x * rstd), rstd = 1 / sqrt(var + eps), for x [..., d]
    and rstd [..., 1]."""
    t = x.dtype.type
    inverse_width = t(1) / t(x.shape[-1])
    if centre:
        mean = np.add.reduce(x, axis=-1, keepdims=True)          # [R, 1], summed as x.mean() does
        np.true_divide(mean, x.shape[-1], out=mean)
        np.subtract(x, mean, out=xhat)
    else:
        np.copyto(xhat, x)
    var = np.asarray(np.vecdot(xhat, xhat))                      # [...], the mean square times d
    var *= inverse_width
    var += t(eps)
    np.sqrt(var, out=var)
    np.reciprocal(var, out=rstd[..., 0])
    xhat *= rstd


def _normalise(x, eps, centre):
    """(xhat, rstd [..., 1]) of x [..., d], rows split over the cores."""
    x = contiguous(x)
    xhat = np.empty(x.shape, x.dtype)                    # C order: its rows are views
    rstd = np.empty(x.shape[:-1] + (1,), x.dtype)
    n_rows = math.prod(x.shape[:-1])
    parts = blocks(n_rows, x.shape[-1])
    if len(parts) == 1:
        _normalise_rows(x, xhat, rstd, eps, centre)
        return xhat, rstd
    x_rows, xhat_rows, rstd_rows = as_rows(x), as_rows(xhat), rstd.reshape(n_rows, 1)
    run_parts(lambda s: _normalise_rows(x_rows[s], xhat_rows[s], rstd_rows[s], eps, centre), parts)
    return xhat, rstd


@twin_of(plain.layernorm_forward)
def layernorm_forward(x, gamma, beta, eps=1e-5):
    """Twin of ``npformer.t08_norm.layernorm_forward``: the centred input becomes xhat in place."""
    xhat, rstd = _normalise(x, eps, centre=True)
    y = xhat * gamma
    y += beta
    return y, NormCache(xhat, rstd, gamma)


@twin_of(plain.rmsnorm_forward)
def rmsnorm_forward(x, gamma, eps=1e-6):
    """Twin of ``npformer.t08_norm.rmsnorm_forward``: the mean square by vecdot."""
    xhat, rstd = _normalise(x, eps, centre=False)
    return xhat * gamma, NormCache(xhat, rstd, gamma)


def _backward_rows(d_out, xhat, rstd, gamma, d_x, centre):
    """d_x = rstd (g - mean(g) - xhat mean(g xhat)), g = d_out gamma, written into d_x, for
    [R, d] rows; returns the rows' parts of (d_gamma, d_beta)."""
    t = xhat.dtype.type
    inverse_width = t(1) / t(xhat.shape[-1])
    by_row = ones(len(d_out), xhat.dtype)
    scratch = d_out * xhat
    d_gamma = by_row @ scratch
    d_beta = by_row @ d_out if centre else None
    np.multiply(d_out, gamma, out=d_x)                           # g
    gx_mean = np.vecdot(d_x, xhat)                               # [R]
    gx_mean *= inverse_width
    np.multiply(xhat, gx_mean[:, None], out=scratch)
    if centre:
        g_mean = np.add.reduce(d_x, axis=-1, keepdims=True)      # summed as the plain twin's mean
        np.true_divide(g_mean, xhat.shape[-1], out=g_mean)
        scratch += g_mean
    d_x -= scratch
    d_x *= rstd
    return d_gamma, d_beta


def _norm_backward(d_out, cache, centre):
    """(d_x, d_gamma, d_beta) of either norm, rows split over the cores."""
    # a plain forward's cache may hold xhat in any layout (that of its input): read C-ordered
    # copies, and write d_x into an array made here, whose rows are views
    xhat, gamma = contiguous(cache.xhat), cache.gamma
    rstd = cache.rstd
    if rstd.shape != xhat.shape[:-1] + (1,) or not rstd.flags.c_contiguous:
        rstd = contiguous(np.broadcast_to(rstd, xhat.shape[:-1] + (1,)))
    if d_out.shape != xhat.shape:
        d_out = np.broadcast_to(d_out, xhat.shape)
    d_out = contiguous(d_out)
    d_x = np.empty(xhat.shape, xhat.dtype)
    rows = [as_rows(a) for a in (d_out, xhat, rstd, d_x)]
    parts = run_parts(lambda s: _backward_rows(*(a[s] for a in rows[:3]), gamma, rows[3][s], centre),
                      blocks(len(rows[0]), rows[0].shape[1]))
    d_gamma = parts[0][0] if len(parts) == 1 else sum(p[0] for p in parts)
    d_beta = (parts[0][1] if len(parts) == 1 else sum(p[1] for p in parts)) if centre else None
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
