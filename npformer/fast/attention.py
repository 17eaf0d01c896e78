"""Fast twin of ``npformer.attention``'s scaled dot-product attention.

- The H / H_kv query heads of a group are stacked as [B, H_kv, G*N, D], so one batched
  matmul serves grouped-query attention without repeating K and V.
- 1/sqrt(D) multiplies q (N x D numbers) instead of the scores (N x M).
- The mask is written into the score table itself and the softmax runs in place.
- Backward: the softmax's row dot by einsum, then in place; the scale applied to dq, dk.
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


@twin_of(plain.attention_forward)
def attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None):
    """Twin of ``npformer.attention.attention_forward``: grouped GEMMs, one score table."""
    B, H, N, D, H_kv, M = check_qkv(q, k, v)
    mask = combine_masks(check_mask(mask, (B, H, N, M)), causal, check_window(window), N, M)
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    G = H // H_kv
    grouped = (q * q.dtype.type(scale)).reshape(B, H_kv, G * N, D)
    scores = grouped @ k.swapaxes(-1, -2)                   # [B, H_kv, G*N, M]
    weights = scores.reshape(B, H, N, M)                    # the same memory, one table
    if mask is not None:
        np.copyto(weights, q.dtype.type(-np.inf), where=~mask)
    softmax_inplace(weights)                                # scores become the weights
    out = (weights.reshape(B, H_kv, G * N, M) @ v).reshape(B, H, N, -1)   # [B, H, N, Dv]
    return out, AttentionCache(q, k, v, SoftmaxCache(weights, -1), scale)


@twin_of(plain.attention_backward)
def attention_backward(d_out, cache):
    """Twin of ``npformer.attention.attention_backward``: grouped GEMMs, softmax backward in place."""
    q, k, v, weights = cache.q, cache.k, cache.v, cache.weights
    B, H, N, D = q.shape
    H_kv, M = k.shape[1], k.shape[2]
    G = H // H_kv
    d_out_g = d_out.reshape(B, H_kv, G * N, -1)
    weights_g = weights.reshape(B, H_kv, G * N, M)
    d_v = weights_g.swapaxes(-1, -2) @ d_out_g              # [B, H_kv, M, Dv]
    d_scores = d_out_g @ v.swapaxes(-1, -2)                 # d_weights [B, H_kv, G*N, M]
    row_dot = np.einsum("...j,...j->...", d_scores, weights_g)[..., None]
    d_scores -= row_dot
    d_scores *= weights_g                                   # d(scores), before the scale
    scale = q.dtype.type(cache.scale)
    d_q = (d_scores @ k).reshape(B, H, N, D)
    d_q *= scale
    d_k = d_scores.swapaxes(-1, -2) @ q.reshape(B, H_kv, G * N, D)   # [B, H_kv, M, D]
    d_k *= scale
    return d_q, d_k, d_v
