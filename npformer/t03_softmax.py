"""Softmax: scores become weights that are non-negative and sum to 1.

    a_j = e^(s_j - max s) / sum_k e^(s_k - max s)        (subtracting the max changes nothing
                                                          and keeps every exponent <= 0)
Backward, for an upstream gradient d_a:
    d_s = a * (d_a - sum_j d_a_j a_j)

Each weight depends on every score, so the gradient of one score collects the whole row.
A boolean ``mask`` ("may read") gives a masked score weight exactly 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .core.module import Cache
from .core.track import fast_twin


# -- softmax ------------------------------------------------------------------
@dataclass(frozen=True)
class SoftmaxCache(Cache):
    """The softmax output and the axis it normalised."""

    y: np.ndarray
    axis: int


@fast_twin
def softmax_forward(x, axis=-1, mask=None):
    """a_j = exp(s_j - max s) / sum_k exp(s_k - max s), only over entries where ``mask`` is True.

    ``mask`` is boolean and broadcasts against ``x``; False entries get weight exactly 0.
    A row with no True entry (fully masked) returns all zeros, never NaN.
    """
    if mask is not None:
        x = np.where(mask, x, -np.inf)                   # a masked score can never win
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)          # a fully masked row has no maximum
    e = np.exp(x - peak)                                 # every exponent <= 0: no overflow
    total = np.sum(e, axis=axis, keepdims=True)
    y = e / np.where(total > 0, total, 1)                # a fully masked row stays all 0
    return y, SoftmaxCache(y, axis)


@fast_twin
def softmax_backward(d_out, cache):
    """Gradient of the scores from the gradient of the weights."""
    y = cache.y
    # forward: y = e / sum(e). Each y_i depends on every x_j: dx_i = y_i (dy_i - sum_j dy_j y_j).
    # A masked entry has y = 0, so its gradient is 0 too.
    return y * (d_out - np.sum(d_out * y, axis=cache.axis, keepdims=True))


def softmax(x, axis=-1, mask=None):
    """Softmax probabilities (see ``softmax_forward``), without the cache."""
    return softmax_forward(x, axis, mask)[0]
