"""Cross-entropy of next-token logits, with an ignore index for padded targets.

loss = mean over counted positions of  -log softmax(logits)[target]
d logits = (softmax(logits) - onehot(target)) / count, and 0 at ignored positions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    # -log softmax(x)[t] = log sum_j exp(x_j - max) - (x_t - max); probs kept for backward.
    safe = np.where(counted, targets, 0)
    probs = logits - np.max(logits, axis=-1, keepdims=True)          # shifted, [..., V]
    picked = np.take_along_axis(probs, safe[..., None], axis=-1)[..., 0]
    np.exp(probs, out=probs)
    total = np.sum(probs, axis=-1, keepdims=True)
    probs /= total                                                   # softmax, in place
    count = int(counted.sum())
    loss = ((np.log(total[..., 0]) - picked) * counted).sum() / max(count, 1)
    return logits.dtype.type(loss), CrossEntropyCache(probs, safe, counted, count)


def cross_entropy_backward(d_loss, cache):
    """(d_logits, None): the targets are integers and get no gradient."""
    # d logits = (probs - onehot(target)) * d_loss / count, zero rows where ignored
    weight = (cache.counted * (d_loss / max(cache.count, 1))).astype(cache.probs.dtype)
    d_logits = cache.probs * weight[..., None]
    rows = d_logits.reshape(-1, d_logits.shape[-1])                  # a view, [B*N, V]
    rows[np.arange(len(rows)), cache.targets.reshape(-1)] -= weight.reshape(-1)   # one per row
    return d_logits, None


def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    """(mean loss, d_logits): the loss over non-ignored targets and its gradient."""
    loss, cache = cross_entropy_forward(logits, targets, ignore_index)
    return loss, cross_entropy_backward(1.0, cache)[0]
