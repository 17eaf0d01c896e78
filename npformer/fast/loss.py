"""Fast twin of ``npformer.loss``: cross-entropy in one [B*N, V] array.

The softmax runs in place on the shifted logits; the loss comes from the log of each
row's sum; the backward scales the probabilities and subtracts the one-hot entries by
fancy indexing (one per row) instead of building a one-hot table.
"""
from __future__ import annotations

import numpy as np

from .. import loss as plain
from ..loss import CrossEntropyCache, IGNORE_INDEX, check_targets
from ..track import twin_of


@twin_of(plain.cross_entropy_forward)
def cross_entropy_forward(logits, targets, ignore_index=IGNORE_INDEX):
    """Twin of ``npformer.loss.cross_entropy_forward``: softmax in place, loss from log-sum-exp."""
    targets, counted = check_targets(logits, targets, ignore_index)
    safe = np.where(counted, targets, 0)
    probs = logits - np.max(logits, axis=-1, keepdims=True)          # shifted, [..., V]
    picked = np.take_along_axis(probs, safe[..., None], axis=-1)[..., 0]
    np.exp(probs, out=probs)
    total = np.sum(probs, axis=-1, keepdims=True)
    probs /= total                                                   # softmax, in place
    count = int(counted.sum())
    loss = ((np.log(total[..., 0]) - picked) * counted).sum() / max(count, 1)
    return logits.dtype.type(loss), CrossEntropyCache(probs, safe, counted, count)


@twin_of(plain.cross_entropy_backward)
def cross_entropy_backward(d_loss, cache):
    """Twin of ``npformer.loss.cross_entropy_backward``: one scaled copy, one-hot by fancy index."""
    weight = (cache.counted * (d_loss / max(cache.count, 1))).astype(cache.probs.dtype)
    d_logits = cache.probs * weight[..., None]
    rows = d_logits.reshape(-1, d_logits.shape[-1])                  # a view, [B*N, V]
    rows[np.arange(len(rows)), cache.targets.reshape(-1)] -= weight.reshape(-1)
    return d_logits, None
