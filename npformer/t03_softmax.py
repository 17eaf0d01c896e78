"""Softmax: scores become weights that are non-negative and sum to 1.

The article writes, for the scores s of one row, a_j = exp(s_j) / sum_k exp(s_k). The code
subtracts the row's maximum first, which changes nothing and keeps every exponent <= 0:

    a_j = exp(s_j - max s) / sum_k exp(s_k - max s)

Backward, for an upstream gradient d_a (``d_s`` means dL/ds):
    d_s = a * (d_a - sum_j d_a_j a_j)
Each weight depends on every score, so the gradient of one score collects the whole row.

Masks: the article adds M to the scores, 0 where reading is allowed and -inf where it is
not. Here a mask is boolean, True where reading is allowed ("may read");
``where(mask, s, -inf)`` is the same limit, and a masked score gets weight exactly 0.

Fast twins: ``softmax_forward`` and ``softmax_backward`` have drop-in twins in
``npformer/fast/functional.py``, which run only under ``npformer.track("fast")``. By
default the functions written here run: a ``print`` in them shows.
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
    """Scores x (the article's s) -> weights y (its a): a_j = exp(s_j - max s) / sum_k
    exp(s_k - max s), only over entries where ``mask`` is True.

    ``mask`` is boolean and broadcasts against ``x``; False entries get weight exactly 0.
    A row with no True entry (fully masked) returns all zeros, never NaN. A row with a NaN
    among its readable scores returns NaN in every entry: no weight of it can be known.
    """
    if mask is not None:
        x = np.where(mask, x, -np.inf)                   # a masked score can never win
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isinf(peak), 0, peak)             # a fully masked row has no maximum (a NaN stays)
    e = np.exp(x - peak)                                 # every exponent <= 0: no overflow
    total = np.sum(e, axis=axis, keepdims=True)
    y = e / np.where(total > 0, total, 1)                # a fully masked row stays all 0
    return y, SoftmaxCache(y, axis)


@fast_twin
def softmax_backward(d_out, cache):
    """d_x, the gradient of the scores, from d_out, the gradient of the weights y."""
    y = cache.y
    # forward: y = e / sum(e). Each y_i depends on every x_j: d_x_i = y_i (d_y_i - sum_j d_y_j y_j).
    # A masked entry has y = 0, so its gradient is 0 too.
    return y * (d_out - np.sum(d_out * y, axis=cache.axis, keepdims=True))


def softmax(x, axis=-1, mask=None):
    """Softmax probabilities (see ``softmax_forward``), without the cache."""
    return softmax_forward(x, axis, mask)[0]
