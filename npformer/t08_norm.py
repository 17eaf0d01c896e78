"""LayerNorm and RMSNorm: rescaling each position's vector over its d features.

The article's LayerNorm subtracts the mean and divides by the standard deviation, then
applies a learned gain and shift; RMSNorm, the variant, skips the mean and divides by the
root mean square:

    LayerNorm:  xhat = (x - mean) / sqrt(var + eps);   y = gamma * xhat + beta
    RMSNorm:    xhat = x / sqrt(mean(x^2) + eps);      y = gamma * xhat          (no beta)

Backward, with d_xhat = d_y * gamma and rstd = 1 / sqrt(var + eps) (or 1 / rms); the
means are over the d features (``d_x`` means dL/dx):
    d_gamma = sum over positions of d_y * xhat;   d_beta = sum over positions of d_y
    LayerNorm:  d_x = rstd * (d_xhat - mean(d_xhat) - xhat * mean(d_xhat * xhat))
    RMSNorm:    d_x = rstd * (d_xhat - xhat * mean(d_xhat * xhat))
x reaches xhat directly, through the mean and through the variance; the three terms of
the LayerNorm line are those three paths (RMSNorm has no mean, so no middle term).

Fast twins: ``layernorm_forward``, ``layernorm_backward``, ``rmsnorm_forward`` and
``rmsnorm_backward`` have drop-in twins in ``npformer/fast/norm.py``, which run only under
``npformer.track("fast")``. By default the functions written here run: a ``print`` in
them shows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .t02_linear import sum_over_positions
from .core.module import Cache, Module, Parameter
from .core.track import fast_twin
from .core.validate import check_float, check_last_dim, check_non_negative, check_positive


@dataclass(frozen=True)
class NormCache(Cache):
    """xhat, the reciprocal standard deviation (or RMS) and the gain."""

    xhat: np.ndarray    # normalised input [..., d]
    rstd: np.ndarray    # 1 / sqrt(var + eps) or 1 / rms, [..., 1]
    gamma: np.ndarray   # the gain [d], only pointed at

    borrowed = ("gamma",)


@fast_twin
def layernorm_forward(x, gamma, beta, eps=1e-5):
    """x [..., d] -> gamma * (x - mean) / sqrt(var + eps) + beta, mean and var over d."""
    mean = x.mean(axis=-1, keepdims=True)                       # [..., 1]
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)        # [..., 1]
    rstd = 1 / np.sqrt(var + eps)
    xhat = (x - mean) * rstd                                    # zero mean, unit variance
    return gamma * xhat + beta, NormCache(xhat, rstd, gamma)


@fast_twin
def layernorm_backward(d_out, cache):
    """-> (d_x, d_gamma, d_beta)."""
    xhat, rstd = cache.xhat, cache.rstd
    # forward: y = gamma * xhat + beta
    d_gamma = sum_over_positions(d_out * xhat)
    d_beta = sum_over_positions(d_out)
    d_xhat = d_out * cache.gamma
    # forward: xhat = (x - mean) * rstd; x reaches xhat directly, through the mean and
    # through the variance, and the three terms below are those three paths
    d_x = rstd * (d_xhat - d_xhat.mean(axis=-1, keepdims=True)
                  - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))
    return d_x, d_gamma, d_beta


@fast_twin
def rmsnorm_forward(x, gamma, eps=1e-6):
    """x [..., d] -> gamma * x / sqrt(mean(x^2) + eps), the mean over d."""
    rstd = 1 / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + eps)   # [..., 1]
    xhat = x * rstd                                                     # unit root mean square
    return gamma * xhat, NormCache(xhat, rstd, gamma)


@fast_twin
def rmsnorm_backward(d_out, cache):
    """-> (d_x, d_gamma)."""
    xhat, rstd = cache.xhat, cache.rstd
    # forward: y = gamma * xhat
    d_gamma = sum_over_positions(d_out * xhat)
    d_xhat = d_out * cache.gamma
    # forward: xhat = x * rstd, rstd = 1 / sqrt(mean(x^2) + eps); x reaches xhat directly
    # and through rstd, the two terms below
    d_x = rstd * (d_xhat - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))
    return d_x, d_gamma


class LayerNorm(Module):
    """x [..., d] -> normalised to zero mean, unit variance per position, then gamma, beta."""

    def __init__(self, d, eps=1e-5, dtype=np.float32):
        self.eps = check_non_negative("eps", eps)       # 0: exact, for inputs that are not constant
        check_positive("d", d)
        self.gamma = Parameter(np.ones(d, dtype))
        self.beta = Parameter(np.zeros(d, dtype))

    def forward(self, x):
        """x [..., d] -> (gamma * xhat + beta, cache)."""
        check_last_dim("x", check_float("x", x, self.gamma.dtype), self.gamma.shape[0])
        return layernorm_forward(x, self.gamma.data, self.beta.data, self.eps)

    def output_shape(self, cache):
        """x's shape: what backward's d_out must be."""
        return cache.xhat.shape

    def backward(self, d_out, cache):
        """d_x from d_out; adds into gamma's and beta's gradients."""
        d_x, d_gamma, d_beta = layernorm_backward(d_out, cache)
        self.gamma.grad += d_gamma
        self.beta.grad += d_beta
        return d_x


class RMSNorm(Module):
    """x [..., d] -> x / rms(x) * gamma, rms(x) = sqrt(mean(x^2) + eps)."""

    def __init__(self, d, eps=1e-6, dtype=np.float32):
        self.eps = check_non_negative("eps", eps)       # 0: exact, for inputs that are not all zero
        check_positive("d", d)
        self.gamma = Parameter(np.ones(d, dtype))

    def forward(self, x):
        """x [..., d] -> (gamma * x / rms(x), cache)."""
        check_last_dim("x", check_float("x", x, self.gamma.dtype), self.gamma.shape[0])
        return rmsnorm_forward(x, self.gamma.data, self.eps)

    def output_shape(self, cache):
        """x's shape: what backward's d_out must be."""
        return cache.xhat.shape

    def backward(self, d_out, cache):
        """d_x from d_out; adds into gamma's gradient."""
        d_x, d_gamma = rmsnorm_backward(d_out, cache)
        self.gamma.grad += d_gamma
        return d_x


NORMS = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}
