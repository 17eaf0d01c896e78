"""Stateless maths as forward/backward pairs: softmax, log-softmax, ReLU, GELU, SiLU.

Every pair follows the module protocol: ``y, cache = f_forward(x)`` and
``dx = f_backward(dy, cache)``. ``FUNCTION_PAIRS`` lists them by name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import erf

from .module import Cache


# -- softmax ------------------------------------------------------------------
@dataclass(frozen=True)
class SoftmaxCache(Cache):
    y: np.ndarray
    axis: int


def softmax_forward(x, axis=-1, mask=None):
    """a_j = exp(s_j - max s) / sum_k exp(s_k - max s), only over entries where ``mask`` is True.

    ``mask`` is boolean and broadcasts against ``x``; False entries get weight exactly 0.
    A row with no True entry (fully masked) returns all zeros, never NaN.
    """
    y = np.where(mask, x, x.dtype.type(-np.inf)) if mask is not None else x.copy()
    softmax_inplace(y, axis)
    return y, SoftmaxCache(y, axis)


def softmax_inplace(scores, axis=-1):
    """Overwrite ``scores`` (masked entries already -inf) with their softmax; returns it.

    One array for the whole computation: shift, exp and normalise write in place
    (a fresh temporary per step costs more than the arithmetic on large tables).
    """
    peak = np.max(scores, axis=axis, keepdims=True)
    peak[~np.isfinite(peak)] = 0                                # fully masked rows
    scores -= peak
    np.exp(scores, out=scores)
    total = np.sum(scores, axis=axis, keepdims=True)
    total[total == 0] = 1                                       # fully masked rows stay 0
    scores *= 1 / total                                         # one division per row
    return scores


def softmax_backward(dy, cache):
    """Gradient of the scores from the gradient of the weights."""
    # dx_i = y_i (dy_i - sum_j dy_j y_j); masked entries have y = 0, so dx = 0 there.
    y = cache.y
    return y * (dy - np.sum(dy * y, axis=cache.axis, keepdims=True))


def softmax(x, axis=-1, mask=None):
    """Softmax probabilities (see ``softmax_forward``), without the cache."""
    return softmax_forward(x, axis, mask)[0]


# -- log-softmax -----------------------------------------------------------------
@dataclass(frozen=True)
class LogSoftmaxCache(Cache):
    probs: np.ndarray
    axis: int


def log_softmax_forward(x, axis=-1):
    """log softmax(x) = x - max - log sum exp(x - max), stable for huge scores."""
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    total = np.sum(e, axis=axis, keepdims=True)
    return shifted - np.log(total), LogSoftmaxCache(e / total, axis)


def log_softmax_backward(dy, cache):
    """Gradient of the input from the gradient of the log-probabilities."""
    # dx_i = dy_i - p_i sum_j dy_j
    return dy - cache.probs * np.sum(dy, axis=cache.axis, keepdims=True)


# -- ReLU -----------------------------------------------------------------------
@dataclass(frozen=True)
class ActivationCache(Cache):
    x: np.ndarray


def relu_forward(x):
    """max(x, 0)."""
    return np.maximum(x, 0), ActivationCache(x)


def relu_backward(dy, cache):
    """Passes dy where x > 0, zero elsewhere."""
    return dy * (cache.x > 0)


# -- GELU, exact -------------------------------------------------------------------
_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def gelu_forward(x):
    """GELU(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), the exact form (BERT)."""
    return (0.5 * x * (1 + erf(x * _SQRT_HALF))).astype(x.dtype, copy=False), ActivationCache(x)


def gelu_backward(dy, cache):
    """dy times the derivative of x Phi(x)."""
    # d/dx x Phi(x) = Phi(x) + x phi(x)
    x = cache.x
    cdf = 0.5 * (1 + erf(x * _SQRT_HALF))
    pdf = np.exp(-0.5 * x * x) * _INV_SQRT_2PI
    return (dy * (cdf + x * pdf)).astype(x.dtype, copy=False)


# -- GELU, tanh approximation ----------------------------------------------------------
_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


@dataclass(frozen=True)
class GeluTanhCache(Cache):
    x: np.ndarray
    t: np.ndarray  # tanh(u), reused by backward


def gelu_tanh_forward(x):
    """GELU ~ 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GPT-2's form."""
    c, a = x.dtype.type(_GELU_C), x.dtype.type(_GELU_A)
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


def gelu_tanh_backward(dy, cache):
    """dy times the derivative of the tanh approximation."""
    # dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2), built in two arrays with out=
    x, t = cache.x, cache.t
    c, a = x.dtype.type(_GELU_C), x.dtype.type(_GELU_A)
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
    slope *= dy
    return slope


# -- SiLU -------------------------------------------------------------------------
@dataclass(frozen=True)
class SiluCache(Cache):
    x: np.ndarray
    s: np.ndarray  # sigmoid(x)


def sigmoid(x):
    """1 / (1 + exp(-x)), in one array (4x faster than scipy's expit on float32).

    For x < -88 (float32) exp(-x) overflows to inf and the result is exactly 0, as it should be.
    """
    s = np.negative(x, out=np.empty_like(x))   # an array even for 0-d x
    with np.errstate(over="ignore"):
        np.exp(s, out=s)
    s += 1
    return np.reciprocal(s, out=s)


def silu_forward(x):
    """SiLU(x) = x * sigmoid(x) (also called swish)."""
    s = sigmoid(x)
    return x * s, SiluCache(x, s)


def silu_backward(dy, cache):
    """dy times the derivative of x sigmoid(x)."""
    # d/dx x s(x) = s (1 + x (1 - s))
    s = cache.s
    dx = 1 - s
    dx *= cache.x
    dx += 1
    dx *= s
    dx *= dy
    return dx


FUNCTION_PAIRS = {
    "softmax": (softmax_forward, softmax_backward),
    "log_softmax": (log_softmax_forward, log_softmax_backward),
    "relu": (relu_forward, relu_backward),
    "gelu": (gelu_forward, gelu_backward),
    "gelu_tanh": (gelu_tanh_forward, gelu_tanh_backward),
    "silu": (silu_forward, silu_backward),
}

ACTIVATIONS = {name: FUNCTION_PAIRS[name] for name in ("relu", "gelu", "gelu_tanh", "silu")}
