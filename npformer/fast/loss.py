"""Fast twin of ``npformer.t11_loss``: cross-entropy in one [B*N, V] array, rows split over cores.

The softmax runs in place on the shifted logits, its row sums by BLAS (ones @); the loss
comes from the log of each row's sum; the backward scales the probabilities and subtracts
the one-hot entries by fancy indexing (one per row) instead of building a one-hot table.
"""
from __future__ import annotations

import math

import numpy as np

from .. import t11_loss as plain
from ..t11_loss import IGNORE_INDEX, CrossEntropyCache, check_targets
from ..core.track import twin_of
from .functional import as_rows, ones
from .parallel import run_blocks


@twin_of(plain.cross_entropy_forward)
def cross_entropy_forward(logits, targets, ignore_index=IGNORE_INDEX):
    """Twin of ``npformer.t11_loss.cross_entropy_forward``: softmax in place, loss from log-sum-exp."""
    targets, counted = check_targets(logits, targets, ignore_index)
    safe = np.where(counted, targets, 0)
    V = logits.shape[-1]
    n_rows = math.prod(logits.shape[:-1])
    rows, probs = logits.reshape(n_rows, V), np.empty(logits.shape, logits.dtype)   # probs: C order
    prob_rows, safe_rows, counted_rows = as_rows(probs), safe.reshape(-1), counted.reshape(-1)

    def work(s):
        p = prob_rows[s]
        np.subtract(rows[s], rows[s].max(axis=-1, keepdims=True), out=p)     # shifted
        picked = p[np.arange(len(p)), safe_rows[s]]
        np.exp(p, out=p)
        total = p @ ones(V, p.dtype)                                     # [rows]
        log_total = np.log(total)
        np.reciprocal(total, out=total)
        p *= total[:, None]                                              # softmax, in place
        log_total -= picked
        return log_total @ counted_rows[s].astype(p.dtype)
    count = int(counted.sum())
    loss = sum(run_blocks(work, len(rows), V)) / max(count, 1)
    return logits.dtype.type(loss), CrossEntropyCache(probs, safe, counted, count)


@twin_of(plain.cross_entropy_backward)
def cross_entropy_backward(d_loss, cache):
    """Twin of ``npformer.t11_loss.cross_entropy_backward``: one scaled copy, one-hot by fancy index."""
    weight = (cache.counted * (d_loss / max(cache.count, 1))).astype(cache.probs.dtype).reshape(-1)
    V = cache.probs.shape[-1]
    n_rows = math.prod(cache.probs.shape[:-1])
    d_logits = np.empty(cache.probs.shape, cache.probs.dtype)     # C order: its rows are views
    rows, prob_rows = as_rows(d_logits), cache.probs.reshape(n_rows, V)
    targets = cache.targets.reshape(-1)

    def work(s):
        np.multiply(prob_rows[s], weight[s, None], out=rows[s])
        rows[s][np.arange(len(rows[s])), targets[s]] -= weight[s]      # one per row
    run_blocks(work, len(rows), V)
    return d_logits, None
