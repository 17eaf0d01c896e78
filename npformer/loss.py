"""Cross-entropy of next-token logits, with an ignore index for padded targets.

loss = mean over counted positions of  -log softmax(logits)[target]
d logits = (softmax(logits) - onehot(target)) / count, and 0 at ignored positions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .functional import log_softmax_forward
from .module import Cache

IGNORE_INDEX = -100


@dataclass(frozen=True)
class CrossEntropyCache(Cache):
    probs: np.ndarray     # [..., V]
    targets: np.ndarray   # [...], ignore_index where not counted
    counted: np.ndarray   # [...] bool
    count: int


def cross_entropy_forward(logits, targets, ignore_index=IGNORE_INDEX):
    """logits [..., V], targets [...] integer ids (or ``ignore_index``) -> (scalar loss, cache).

    If every target is ignored the loss is 0 and the gradient is all zeros.
    """
    targets = np.asarray(targets)
    if not np.issubdtype(targets.dtype, np.integer):
        raise TypeError(f"targets: expected integer ids, got dtype {targets.dtype}")
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets: expected shape {logits.shape[:-1]} (logits without V), got {targets.shape}")
    V = logits.shape[-1]
    counted = targets != ignore_index
    if ((targets[counted] < 0) | (targets[counted] >= V)).any():
        raise ValueError(f"targets: expected ids in [0, {V}) or ignore_index {ignore_index}")
    logp, lsm = log_softmax_forward(logits)
    safe = np.where(counted, targets, 0)
    picked = np.take_along_axis(logp, safe[..., None], axis=-1)[..., 0]
    count = int(counted.sum())
    loss = -(picked * counted).sum() / max(count, 1)
    return logits.dtype.type(loss), CrossEntropyCache(lsm.probs, safe, counted, count)


def cross_entropy_backward(d_loss, cache):
    d_logits = cache.probs.copy()
    np.put_along_axis(d_logits, cache.targets[..., None],
                      np.take_along_axis(d_logits, cache.targets[..., None], axis=-1) - 1, axis=-1)
    d_logits *= (cache.counted * (d_loss / max(cache.count, 1)))[..., None].astype(d_logits.dtype)
    return d_logits, None


def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    """(mean loss, d_logits): the loss over non-ignored targets and its gradient."""
    loss, cache = cross_entropy_forward(logits, targets, ignore_index)
    return loss, cross_entropy_backward(1.0, cache)[0]
