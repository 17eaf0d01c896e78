"""Fast twin of ``npformer.attention``'s scaled dot-product attention.

- The H / H_kv query heads of a group are stacked as [B, H_kv, G*N, D], so one batched
  matmul serves grouped-query attention without repeating K and V.
- 1/sqrt(D) multiplies q (N x D numbers) instead of the scores (N x M).
- The mask is written into the score table itself and the softmax runs in place.
- Backward: the softmax's row dot by einsum, then in place; the scale applied to dq, dk.
- The batch is cut into blocks computed at once on the cores (``parallel.run_blocks``).
"""
from __future__ import annotations

import math

import numpy as np

from .. import attention as plain
from ..attention import AttentionCache, combine_masks
from ..functional import SoftmaxCache
from ..track import twin_of
from ..validate import check_mask, check_qkv, check_window
from .functional import softmax_inplace
from .parallel import run_blocks


def _batch_rows(mask, s):
    """The rows of a mask broadcasting to [B, ...] that belong to batch block ``s``."""
    return mask if mask.ndim < 4 or mask.shape[0] == 1 else mask[s]


@twin_of(plain.attention_forward)
def attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None):
    """Twin of ``npformer.attention.attention_forward``: grouped GEMMs, one score table."""
    B, H, N, D, H_kv, M = check_qkv(q, k, v)
    mask = combine_masks(check_mask(mask, (B, H, N, M)), causal, check_window(window), N, M)
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    G = H // H_kv
    weights = np.empty((B, H, N, M), q.dtype)
    out = np.empty((B, H, N, v.shape[3]), q.dtype)

    def work(s):
        nb = len(range(B)[s])
        grouped = (q[s] * q.dtype.type(scale)).reshape(nb, H_kv, G * N, D)
        block = weights[s]                                       # [nb, H, N, M], contiguous
        np.matmul(grouped, k[s].swapaxes(-1, -2), out=block.reshape(nb, H_kv, G * N, M))
        if mask is not None:
            np.copyto(block, q.dtype.type(-np.inf), where=~_batch_rows(mask, s))
        softmax_inplace(block)                                   # scores become the weights
        out[s] = (block.reshape(nb, H_kv, G * N, M) @ v[s]).reshape(nb, H, N, -1)
    run_blocks(work, B, row_work=H * N * M)
    return out, AttentionCache(q, k, v, SoftmaxCache(weights, -1), scale)


@twin_of(plain.attention_backward)
def attention_backward(d_out, cache):
    """Twin of ``npformer.attention.attention_backward``: grouped GEMMs, softmax backward in place."""
    q, k, v, weights = cache.q, cache.k, cache.v, cache.weights
    B, H, N, D = q.shape
    H_kv, M = k.shape[1], k.shape[2]
    G = H // H_kv
    scale = q.dtype.type(cache.scale)
    d_q, d_k, d_v = np.empty_like(q, order="C"), np.empty_like(k, order="C"), np.empty_like(v, order="C")

    def work(s):
        nb = len(range(B)[s])
        d_out_g = d_out[s].reshape(nb, H_kv, G * N, -1)
        weights_g = weights[s].reshape(nb, H_kv, G * N, M)
        d_v[s] = weights_g.swapaxes(-1, -2) @ d_out_g            # [nb, H_kv, M, Dv]
        d_scores = d_out_g @ v[s].swapaxes(-1, -2)               # d_weights [nb, H_kv, G*N, M]
        d_scores -= np.einsum("...j,...j->...", d_scores, weights_g)[..., None]
        d_scores *= weights_g                                    # d(scores), before the scale
        d_q[s] = (d_scores @ k[s]).reshape(nb, H, N, D)
        d_q[s] *= scale
        d_k[s] = d_scores.swapaxes(-1, -2) @ q[s].reshape(nb, H_kv, G * N, D)
        d_k[s] *= scale
    run_blocks(work, B, row_work=2 * H * N * M)
    return d_q, d_k, d_v
