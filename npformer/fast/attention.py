"""Fast twin of ``npformer.t04_attention``'s scaled dot-product attention.

- The H / H_kv query heads of a group are stacked as [B, H_kv, G*N, D], so one batched
  matmul serves grouped-query attention without repeating K and V.
- 1/sqrt(D) multiplies q (N x D numbers) instead of the scores (N x M).
- The mask is written into the score table itself (the causal table is made once per
  shape and kept) and the softmax runs in place, its row sums by BLAS.
- Every product writes straight into its place (``out=``).
- Backward: the softmax's row dot by vecdot, then in place; the scale applied to dq, dk.
- The batch (or, for a single sequence, the key/value heads) is cut into blocks computed
  at once on the cores (``parallel.run_blocks``).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import t04_attention as plain
from ..t04_attention import AttentionCache, causal_table, combine_masks
from ..t03_softmax import SoftmaxCache
from ..core.track import twin_of
from ..core.validate import check_mask, check_qkv, check_window, qkv_shapes
from .functional import as_rows, softmax_backward_rows, softmax_rows, view_as
from .parallel import run_blocks


def _blocks_over(B, H_kv, G, row_work, work):
    """Run ``work(batch, kv_heads, q_heads)`` (three slices) over blocks of the batch, or of
    the key/value heads when there is a single sequence."""
    if B > 1 or H_kv == 1:
        run_blocks(lambda s: work(s, slice(None), slice(None)), B, H_kv * row_work)
    else:
        run_blocks(lambda s: work(slice(None), s, slice(s.start * G, s.stop * G)), H_kv, row_work)


@functools.lru_cache(maxsize=16)
def _causal_forbidden(n, m, window):
    """The [n, m] table of keys a query may NOT read under the causal rule (kept, read-only)."""
    table = ~causal_table(n, m, window)
    table.setflags(write=False)
    return table


def _forbidden(mask, causal, window, N, M):
    """Where no query may read, as 4 axes broadcasting to [B, H, N, M]; None when nothing is."""
    if mask is None:
        if not causal and window is None:
            return None
        return _causal_forbidden(N, M, window)[None, None]
    forbidden = ~combine_masks(mask, causal, window, N, M)
    return forbidden.reshape((1,) * (4 - forbidden.ndim) + forbidden.shape)


def _mask_block(mask, batch, q_heads):
    """The part of a 4-axis mask broadcasting to [B, H, N, M] that belongs to one block."""
    return mask[batch if mask.shape[0] > 1 else slice(None), q_heads if mask.shape[1] > 1 else slice(None)]


@twin_of(plain.attention_forward)
def attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None):
    """Twin of ``npformer.t04_attention.attention_forward``: one score table, softmax in place."""
    check_qkv(q, k, v)
    return _forward(q, k, v, mask, scale, causal, window)


@twin_of(plain.grouped_attention_forward)
def grouped_attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None):
    """Twin of ``npformer.t04_attention.grouped_attention_forward``: grouped GEMMs, K and V
    never repeated."""
    return _forward(q, k, v, mask, scale, causal, window)


def _forward(q, k, v, mask, scale, causal, window):
    """Attention of H query heads over H_kv key/value heads (any group size)."""
    B, H, N, D, H_kv, M = qkv_shapes(q, k, v)
    forbidden = _forbidden(check_mask(mask, (B, H, N, M)), causal, check_window(window), N, M)
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    G = H // H_kv
    Dv = v.shape[3]
    weights = np.empty((B, H, N, M), q.dtype)
    out = np.empty((B, H, N, Dv), q.dtype)

    def work(batch, kv_heads, q_heads):
        kb, vb = k[batch, kv_heads], v[batch, kv_heads]
        nb, nh = kb.shape[:2]
        block = weights[batch, q_heads]          # contiguous: a whole batch row, or B = 1
        grouped = view_as(block, (nb, nh, G * N, M))
        scaled = np.empty((nb, nh * G, N, D), q.dtype)
        np.multiply(q[batch, q_heads], q.dtype.type(scale), out=scaled)
        np.matmul(scaled.reshape(nb, nh, G * N, D), kb.swapaxes(-1, -2), out=grouped)
        if forbidden is not None:
            np.copyto(block, q.dtype.type(-np.inf), where=_mask_block(forbidden, batch, q_heads))
        if block.size:
            softmax_rows(as_rows(block))                          # scores become the weights
        np.matmul(grouped, vb, out=view_as(out[batch, q_heads], (nb, nh, G * N, Dv)))
    _blocks_over(B, H_kv, G, G * N * M, work)
    return out, AttentionCache(q, k, v, SoftmaxCache(weights, -1), scale)


@twin_of(plain.attention_backward)
def attention_backward(d_out, cache):
    """Twin of ``npformer.t04_attention.attention_backward``: the softmax backward in place."""
    return _backward(d_out, cache)


@twin_of(plain.grouped_attention_backward)
def grouped_attention_backward(d_out, cache):
    """Twin of ``npformer.t04_attention.grouped_attention_backward``: grouped GEMMs, each shared
    key/value head's gradient summed by the product itself."""
    return _backward(d_out, cache)


def _backward(d_out, cache):
    """(d_q, d_k, d_v) of ``_forward`` (any group size)."""
    q, k, v, weights = cache.q, cache.k, cache.v, cache.weights
    B, H, N, D = q.shape
    H_kv, M = k.shape[1], k.shape[2]
    G = H // H_kv
    Dv = v.shape[3]
    scale = q.dtype.type(cache.scale)
    d_q, d_k, d_v = np.empty(q.shape, q.dtype), np.empty(k.shape, k.dtype), np.empty(v.shape, v.dtype)

    def work(batch, kv_heads, q_heads):
        kb, vb = k[batch, kv_heads], v[batch, kv_heads]
        nb, nh = kb.shape[:2]
        d_out_g = d_out[batch, q_heads].reshape(nb, nh, G * N, Dv)
        weights_g = np.ascontiguousarray(weights[batch, q_heads]).reshape(nb, nh, G * N, M)
        np.matmul(weights_g.swapaxes(-1, -2), d_out_g, out=d_v[batch, kv_heads])     # [nb, nh, M, Dv]
        d_scores = np.empty((nb, nh, G * N, M), q.dtype)            # d_weights
        np.matmul(d_out_g, vb.swapaxes(-1, -2), out=d_scores)
        if d_scores.size:
            softmax_backward_rows(as_rows(d_scores), as_rows(weights_g))   # d(scores), before the scale
        d_q_block = view_as(d_q[batch, q_heads], (nb, nh, G * N, D))
        np.matmul(d_scores, kb, out=d_q_block)
        d_q_block *= scale
        d_k_block = d_k[batch, kv_heads]
        np.matmul(d_scores.swapaxes(-1, -2), q[batch, q_heads].reshape(nb, nh, G * N, D), out=d_k_block)
        d_k_block *= scale
    _blocks_over(B, H_kv, G, 2 * G * N * M, work)
    return d_q, d_k, d_v
