"""Log-softmax and the cross-entropy of next-token logits, with an ignore index for padded targets.

The article ends at the logits and their softmax, and leaves training to its next part;
this file adds the loss a training step needs (``d_x`` means dL/dx):

    log-softmax  y = x - max x - log sum_j exp(x_j - max x)      d_x = d_y - p * sum(d_y),
                 (stable for huge scores)                             p = exp(y) = softmax(x)
    loss         = mean over counted positions of -log softmax(logits)[target]
    d_logits     = (softmax(logits) - onehot(target)) / count, and 0 at ignored positions

Fast twins: ``cross_entropy_forward`` and ``cross_entropy_backward`` have drop-in twins in
``npformer/fast/loss.py``, which run only under ``npformer.track("fast")``. By default the
functions written here run: a ``print`` in them shows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .core.module import Cache
from .core.track import fast_twin

IGNORE_INDEX = -100


# -- log-softmax -----------------------------------------------------------------
@dataclass(frozen=True)
class LogSoftmaxCache(Cache):
    """The probabilities and the axis."""

    probs: np.ndarray
    axis: int


def log_softmax_forward(x, axis=-1):
    """log softmax(x) = x - max - log sum exp(x - max), stable for huge scores."""
    shifted = x - np.max(x, axis=axis, keepdims=True)
    log_total = np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    y = shifted - log_total
    return y, LogSoftmaxCache(np.exp(y), axis)


def log_softmax_backward(d_out, cache):
    """Gradient of the input from the gradient of the log-probabilities."""
    # forward: y_i = x_i - log sum_j e^x_j, so dx_i = dy_i - p_i sum_j dy_j
    return d_out - cache.probs * np.sum(d_out, axis=cache.axis, keepdims=True)


# -- cross-entropy ----------------------------------------------------------------

@dataclass(frozen=True)
class CrossEntropyCache(Cache):
    """The probabilities, the target ids and which of them count."""

    probs: np.ndarray     # softmax(logits) [..., V]
    targets: np.ndarray   # [...] the target ids, 0 where not counted
    counted: np.ndarray   # [...] bool: which targets count
    count: int            # how many count


def check_targets(logits, targets, ignore_index):
    """Integer targets shaped like the logits without V, each an id in [0, V) or ``ignore_index``."""
    targets = np.asarray(targets)
    if not np.issubdtype(targets.dtype, np.integer):
        raise TypeError(f"targets: expected integer ids, got dtype {targets.dtype}")
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets: expected shape {logits.shape[:-1]} (logits without V), got {targets.shape}")
    counted = targets != ignore_index
    V = logits.shape[-1]
    if ((targets[counted] < 0) | (targets[counted] >= V)).any():
        raise ValueError(f"targets: expected ids in [0, {V}) or ignore_index {ignore_index}")
    return targets, counted


@fast_twin
def cross_entropy_forward(logits, targets, ignore_index=IGNORE_INDEX):
    """logits [..., V], targets [...] integer ids (or ``ignore_index``) -> (scalar loss, cache).

    If every target is ignored the loss is 0.0 (positive zero) and the gradient is all zeros.
    """
    targets, counted = check_targets(logits, targets, ignore_index)
    safe = np.where(counted, targets, 0)                                  # any id where ignored
    log_probs, log_softmax = log_softmax_forward(logits)                  # [..., V]
    picked = np.take_along_axis(log_probs, safe[..., None], axis=-1)[..., 0]   # log p(target)
    count = int(counted.sum())
    loss = -np.sum(picked * counted) / max(count, 1)
    if count == 0:
        loss = 0.0      # no counted target: +0.0 (the line above gives -0.0), gradient all zero
    return logits.dtype.type(loss), CrossEntropyCache(log_softmax.probs, safe, counted, count)


@fast_twin
def cross_entropy_backward(d_loss, cache):
    """(d_logits, None): the targets are integers and get no gradient."""
    # forward: loss = -(1/count) sum over counted positions of log softmax(logits)[target]
    one_hot = np.zeros_like(cache.probs)
    np.put_along_axis(one_hot, cache.targets[..., None], 1, axis=-1)
    weight = cache.counted * (d_loss / max(cache.count, 1))               # [...], 0 where ignored
    d_logits = (cache.probs - one_hot) * weight[..., None].astype(cache.probs.dtype)
    return d_logits, None


def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    """(mean loss, d_logits): the loss over non-ignored targets and its gradient."""
    loss, cache = cross_entropy_forward(logits, targets, ignore_index)
    return loss, cross_entropy_backward(1.0, cache)[0]
