"""LayerNorm and RMSNorm: rescaling each position's vector over its d features.

LayerNorm:  y = (x - mean) / sqrt(var + eps) * gamma + beta
RMSNorm:    y = x / sqrt(mean(x^2) + eps) * gamma          (no centring, no beta)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .module import Cache, Module, Parameter, check_float


@dataclass(frozen=True)
class NormCache(Cache):
    xhat: np.ndarray   # normalised input [..., d]
    rstd: np.ndarray   # 1 / sqrt(var + eps) or 1 / rms, [..., 1]


def _row_sum(a):
    """Sum over every axis but the last, as a matrix-vector product (faster than .sum)."""
    a2 = a.reshape(-1, a.shape[-1])
    return np.ones(len(a2), a.dtype) @ a2


class LayerNorm(Module):
    """x [..., d] -> normalised to zero mean, unit variance per position, then gamma, beta."""

    def __init__(self, d, eps=1e-5, dtype=np.float32):
        self.eps = eps
        self.gamma = Parameter(np.ones(d, dtype))
        self.beta = Parameter(np.zeros(d, dtype))

    def forward(self, x):
        check_float("x", x, self.gamma.dtype)
        mean = x.mean(axis=-1, keepdims=True)
        centred = x - mean
        var = np.mean(centred * centred, axis=-1, keepdims=True)
        rstd = 1.0 / np.sqrt(var + x.dtype.type(self.eps))
        xhat = centred * rstd
        return xhat * self.gamma.data + self.beta.data, NormCache(xhat, rstd)

    def backward(self, d_y, cache):
        xhat, rstd = cache.xhat, cache.rstd
        self.gamma.grad += _row_sum(d_y * xhat)
        self.beta.grad += _row_sum(d_y)
        g = d_y * self.gamma.data
        # dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
        return rstd * (g - g.mean(axis=-1, keepdims=True)
                       - xhat * np.mean(g * xhat, axis=-1, keepdims=True))


class RMSNorm(Module):
    """x [..., d] -> x / rms(x) * gamma, rms(x) = sqrt(mean(x^2) + eps)."""

    def __init__(self, d, eps=1e-6, dtype=np.float32):
        self.eps = eps
        self.gamma = Parameter(np.ones(d, dtype))

    def forward(self, x):
        check_float("x", x, self.gamma.dtype)
        rstd = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + x.dtype.type(self.eps))
        xhat = x * rstd
        return xhat * self.gamma.data, NormCache(xhat, rstd)

    def backward(self, d_y, cache):
        xhat, rstd = cache.xhat, cache.rstd
        self.gamma.grad += _row_sum(d_y * xhat)
        g = d_y * self.gamma.data
        # dx = rstd * (g - xhat * mean(g * xhat))
        return rstd * (g - xhat * np.mean(g * xhat, axis=-1, keepdims=True))


NORMS = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}
