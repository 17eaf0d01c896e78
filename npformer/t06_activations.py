"""Activations: the non-linear functions inside the FFN (and BERT's pooler).

The article's FFN puts an activation between its two projections, ReLU in its worked
example, GELU or a gated SiLU in real models; without it the two would collapse into one.
Each is a forward/backward pair here; for an upstream gradient d_y (``d_x`` means dL/dx):

    ReLU         y = max(x, 0)                         d_x = d_y * [x > 0]
    GELU         y = x Phi(x)                          d_x = d_y * (Phi(x) + x phi(x))
    tanh-GELU    y = x (1 + t) / 2, t = tanh(u),       d_x = d_y * ((1 + t) / 2 + x (1 - t^2) u' / 2)
                 u = c (x + a x^3)                            u' = c (1 + 3 a x^2)
    SiLU         y = x s, s = sigmoid(x)               d_x = d_y * s (1 + x (1 - s))
    tanh         y = tanh(x)                           d_x = d_y * (1 - y^2)

Phi is the standard normal cumulative distribution and phi its density.

Fast twins: ``gelu_tanh_forward``, ``gelu_tanh_backward``, ``silu_forward`` and
``silu_backward`` have drop-in twins in ``npformer/fast/functional.py``, which run only
under ``npformer.track("fast")``. By default the functions written here run: a ``print``
in them shows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import erf, expit

from .core.module import Cache
from .core.track import fast_twin


# -- ReLU -----------------------------------------------------------------------
@dataclass(frozen=True)
class ActivationCache(Cache):
    """The activation's input."""

    x: np.ndarray


def relu_forward(x):
    """max(x, 0)."""
    return np.maximum(x, 0), ActivationCache(x)


def relu_backward(d_out, cache):
    """Passes d_out where x > 0, zero elsewhere."""
    return d_out * (cache.x > 0)


# -- GELU, exact -------------------------------------------------------------------
def _phi(x):
    """The standard normal density."""
    return np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _Phi(x):
    """The standard normal cumulative distribution."""
    return 0.5 * (1 + erf(x / math.sqrt(2)))


def gelu_forward(x):
    """GELU(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), the exact form (BERT)."""
    return x * _Phi(x), ActivationCache(x)


def gelu_backward(d_out, cache):
    """d_out times the derivative of x Phi(x)."""
    x = cache.x
    # forward: y = x Phi(x), and Phi' = phi
    return d_out * (_Phi(x) + x * _phi(x))


# -- GELU, tanh approximation ----------------------------------------------------------
GELU_C = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715


@dataclass(frozen=True)
class GeluTanhCache(Cache):
    """The input and tanh(u), reused by the backward."""

    x: np.ndarray
    t: np.ndarray  # tanh(u), reused by backward


@fast_twin
def gelu_tanh_forward(x):
    """GELU ~ 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GPT-2's form."""
    u = GELU_C * (x + GELU_A * x * x * x)      # x * x * x: numpy computes x ** 3 by pow(), 40x slower
    t = np.tanh(u)
    return 0.5 * x * (1 + t), GeluTanhCache(x, t)


@fast_twin
def gelu_tanh_backward(d_out, cache):
    """d_out times the derivative of the tanh approximation."""
    x, t = cache.x, cache.t
    # forward: u = c (x + a x^3), so du/dx = c (1 + 3 a x^2)
    du = GELU_C * (1 + 3 * GELU_A * x ** 2)
    # forward: y = 0.5 x (1 + t), t = tanh(u), and tanh' = 1 - tanh^2
    slope = 0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * du
    return d_out * slope


# -- SiLU -------------------------------------------------------------------------
@dataclass(frozen=True)
class SiluCache(Cache):
    """The input and sigmoid(x), reused by the backward."""

    x: np.ndarray
    s: np.ndarray  # sigmoid(x)


def sigmoid(x):
    """1 / (1 + exp(-x)), without overflow warnings for very negative x."""
    return expit(x)


@fast_twin
def silu_forward(x):
    """SiLU(x) = x * sigmoid(x) (also called swish)."""
    s = sigmoid(x)
    return x * s, SiluCache(x, s)


@fast_twin
def silu_backward(d_out, cache):
    """d_out times the derivative of x sigmoid(x)."""
    x, s = cache.x, cache.s
    # forward: y = x s, and s' = s (1 - s), so dy/dx = s + x s (1 - s)
    return d_out * s * (1 + x * (1 - s))


# -- tanh (BERT's pooler) ------------------------------------------------------------
@dataclass(frozen=True)
class TanhCache(Cache):
    """The output tanh(x), from which the backward's 1 - y^2 comes."""

    y: np.ndarray  # tanh(x): the derivative needs only the output


def tanh_forward(x):
    """tanh(x) = (e^x - e^-x) / (e^x + e^-x), in (-1, 1)."""
    y = np.tanh(x)
    return y, TanhCache(y)


def tanh_backward(d_out, cache):
    """d_out times the derivative of tanh."""
    # forward: y = tanh(x), and tanh' = 1 - tanh^2
    return d_out * (1 - cache.y ** 2)


ACTIVATIONS = {
    "relu": (relu_forward, relu_backward),
    "gelu": (gelu_forward, gelu_backward),
    "gelu_tanh": (gelu_tanh_forward, gelu_tanh_backward),
    "silu": (silu_forward, silu_backward),
}
