"""Fast twins of ``npformer.functional``: softmax, tanh-GELU and SiLU written in few arrays.

On this machine a fresh multi-megabyte temporary costs more in page faults than the
arithmetic on it, so each function here works in one or two arrays, updated in place
with ``out=`` and augmented assignment. The numbers are those of the plain twins.
"""
from __future__ import annotations

import numpy as np

from .. import functional as plain
from ..functional import GELU_A, GELU_C, GeluTanhCache, SiluCache, SoftmaxCache
from ..track import twin_of


def softmax_inplace(scores, axis=-1):
    """Overwrite ``scores`` (masked entries already -inf) with their softmax; returns it.

    Shift, exp and normalise write into the same array; a fully masked row becomes zeros.
    """
    peak = np.max(scores, axis=axis, keepdims=True)
    peak[~np.isfinite(peak)] = 0                                # fully masked rows
    scores -= peak
    np.exp(scores, out=scores)
    total = np.sum(scores, axis=axis, keepdims=True)
    total[total == 0] = 1                                       # fully masked rows stay 0
    scores *= 1 / total                                         # one division per row
    return scores


@twin_of(plain.softmax_forward)
def softmax_forward(x, axis=-1, mask=None):
    """Twin of ``npformer.functional.softmax_forward``: one array, updated in place."""
    if mask is not None:
        y = np.where(mask, x, x.dtype.type(-np.inf))
    else:
        y = x.copy()
    softmax_inplace(y, axis)
    return y, SoftmaxCache(y, axis)


@twin_of(plain.softmax_backward)
def softmax_backward(d_out, cache):
    """Twin of ``npformer.functional.softmax_backward``: the row dot by einsum, then in place."""
    y = cache.y
    axis = cache.axis % y.ndim
    if axis == y.ndim - 1:
        row_dot = np.einsum("...j,...j->...", d_out, y)[..., None]
    else:
        row_dot = np.sum(d_out * y, axis=axis, keepdims=True)
    d_x = d_out - row_dot
    d_x *= y
    return d_x


@twin_of(plain.gelu_tanh_forward)
def gelu_tanh_forward(x):
    """Twin of ``npformer.functional.gelu_tanh_forward``: two arrays, built with ``out=``."""
    c, a = x.dtype.type(GELU_C), x.dtype.type(GELU_A)
    t = x * x                                   # x*x*x, never x**3 (slow on float32)
    t *= a
    t += 1
    t *= x
    t *= c
    np.tanh(t, out=t)                           # t = tanh(c x (1 + a x^2)), in place
    y = t + 1
    y *= x
    y *= x.dtype.type(0.5)
    return y, GeluTanhCache(x, t)


@twin_of(plain.gelu_tanh_backward)
def gelu_tanh_backward(d_out, cache):
    """Twin of ``npformer.functional.gelu_tanh_backward``: two arrays, built with ``out=``."""
    x, t = cache.x, cache.t
    c, a = x.dtype.type(GELU_C), x.dtype.type(GELU_A)
    inner = x * x
    inner *= 3 * a
    inner += 1
    inner *= x
    inner *= c                                  # c x (1 + 3 a x^2)
    slope = t * t
    np.subtract(1, slope, out=slope)            # 1 - t^2
    slope *= inner
    slope += t
    slope += 1
    slope *= x.dtype.type(0.5)
    slope *= d_out
    return slope


def sigmoid(x):
    """1 / (1 + exp(-x)) in one array (4x faster than scipy's expit on float32)."""
    s = np.negative(x, out=np.empty_like(x))   # an array even for 0-d x
    with np.errstate(over="ignore"):            # exp(-x) = inf for x < -88: s is then exactly 0
        np.exp(s, out=s)
    s += 1
    return np.reciprocal(s, out=s)


@twin_of(plain.silu_forward)
def silu_forward(x):
    """Twin of ``npformer.functional.silu_forward``: the sigmoid in one array."""
    s = sigmoid(x)
    return x * s, SiluCache(x, s)


@twin_of(plain.silu_backward)
def silu_backward(d_out, cache):
    """Twin of ``npformer.functional.silu_backward``: one array, updated in place."""
    s = cache.s
    d_x = 1 - s
    d_x *= cache.x
    d_x += 1
    d_x *= s
    d_x *= d_out
    return d_x
