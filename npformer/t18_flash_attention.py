"""Blockwise attention with an online softmax (the FlashAttention recurrence), forward and backward.

The article notes that the score table grows fast with the length; this variant
computes the same attention (``t04_attention``) without ever holding that table. The
keys are read one block of ``block_size`` at a time, and each query row keeps a running
maximum m, a running denominator l and a running weighted sum acc. When a block of
scores s arrives:

    m_new = max(m, max_j s_j)
    l     = l * exp(m - m_new) + sum_j exp(s_j - m_new)
    acc   = acc * exp(m - m_new) + sum_j exp(s_j - m_new) v_j
    out   = acc / l                       (after the last block)

which is exactly softmax(s) v, without ever holding more than one block of scores.

Backward keeps only the log-sum-exp of each row, lse = m + log l, and recomputes each
block's weights as p = exp(s - lse). With delta_i = sum_c d_out_ic out_ic (equal to
sum_j d_p_ij p_ij: a sum over the head width D instead of over the keys; ``d_x`` means dL/dx):

    d_v += p^T d_out,  d_p = d_out v^T,  d_s = p (d_p - delta) scale,  d_q += d_s k,  d_k += d_s^T q

Memory is linear in the length: the queries, outputs, lse and one [N, block] tile of
scores. The Python loop runs over key blocks (M / block_size of them), never over
positions. The causal rule (``causal``, ``window``) is applied tile by tile from
positions with ``t04_attention.may_read``; a boolean "may read" ``mask`` broadcasting to
[B, H, N, M] may be given as well (a padding mask [B, 1, 1, M] costs nothing).

Fast twins: ``flash_attention_forward`` and ``flash_attention_backward`` have drop-in twins
in ``npformer/fast/flash_attention.py``, which run only under ``npformer.track("fast")``.
By default the functions written here run: a ``print`` in them shows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .t04_attention import ATTENTION_KERNELS, may_read, repeat_kv, sum_groups
from .core.module import Cache
from .core.track import fast_twin
from .core.validate import check_mask, check_positive, qkv_shapes, check_window


@dataclass(frozen=True)
class FlashAttentionCache(Cache):
    """What the blockwise backward needs: inputs, output, log-sum-exp per row, settings."""

    q: np.ndarray          # [B, H, N, D]
    k: np.ndarray          # [B, H_kv, M, D]
    v: np.ndarray          # [B, H_kv, M, Dv]
    out: np.ndarray        # [B, H, N, Dv]
    lse: np.ndarray        # [B, H, N], log sum exp of each row's scores (-inf: nothing readable)
    mask: np.ndarray | None
    scale: float
    causal: bool
    window: int | None
    block_size: int

    @property
    def weights(self):
        """The [B, H, N, M] attention weights, recomputed from lse (for inspection only)."""
        M = self.k.shape[2]
        scores = block_scores(self, 0, M)
        lse = self.lse[..., None]
        return np.exp(scores - np.where(np.isfinite(lse), lse, np.inf))


def block_scores(cache, start, stop):
    """Masked, scaled scores [B, H, N, stop - start] of the keys start..stop-1 (-inf where masked)."""
    q, k = cache.q, cache.k
    B, H, N, _ = q.shape
    M = k.shape[2]
    k_heads = repeat_kv(k[:, :, start:stop], H // k.shape[1])             # [B, H, bk, D]
    scores = q @ k_heads.swapaxes(-1, -2) * cache.scale                    # [B, H, N, bk]
    allowed = np.ones(scores.shape, bool)
    if cache.causal or cache.window is not None:
        query_pos = np.arange(M - N, M)[:, None]                          # the last N of M
        allowed = allowed & may_read(query_pos, np.arange(start, stop)[None, :], cache.window)
    if cache.mask is not None:
        allowed = allowed & np.broadcast_to(cache.mask, (B, H, N, M))[..., start:stop]
    return np.where(allowed, scores, -np.inf)


def flash_settings(q, k, v, mask, scale, causal, window, block_size):
    """Validated inputs, as a cache without ``out`` and ``lse`` (the tiles read their settings there)."""
    B, H, N, D, H_kv, M = qkv_shapes(q, k, v)
    mask = check_mask(mask, (B, H, N, M))
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    return FlashAttentionCache(q, k, v, None, None, mask, scale, bool(causal), check_window(window),
                               int(check_positive("block_size", block_size)))


@fast_twin
def flash_attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None, block_size=128):
    """q [B, H, N, D], k [B, H_kv, M, D], v [B, H_kv, M, Dv] -> out [B, H, N, Dv], equal to
    ``attention_forward`` with the same masking, computed ``block_size`` keys at a time.

    ``causal``: query i (the last N of M positions) reads keys j <= its position; ``window``:
    also at most the ``window`` most recent keys; ``mask``: any further boolean mask. A row
    with no readable key gets a zero output. ``scale`` defaults to 1/sqrt(D).
    """
    settings = flash_settings(q, k, v, mask, scale, causal, window, block_size)
    B, H, N, _ = q.shape
    M, Dv = k.shape[2], v.shape[3]
    v_heads = repeat_kv(v, H // k.shape[1])                               # [B, H, M, Dv]
    running_max = np.full((B, H, N, 1), -np.inf, q.dtype)                # m
    total = np.zeros((B, H, N, 1), q.dtype)                               # l
    acc = np.zeros((B, H, N, Dv), q.dtype)                                # sum of p v so far
    for start in range(0, M, settings.block_size):
        stop = min(M, start + settings.block_size)
        scores = block_scores(settings, start, stop)                      # [B, H, N, bk]
        new_max = np.maximum(running_max, scores.max(axis=-1, keepdims=True))
        safe_max = np.where(np.isfinite(new_max), new_max, 0)             # nothing readable yet
        p = np.exp(scores - safe_max)                                     # this block's weights
        rescale = np.exp(running_max - safe_max)                          # exp(m - m_new)
        total = total * rescale + p.sum(axis=-1, keepdims=True)
        acc = acc * rescale + p @ v_heads[:, :, start:stop]
        running_max = new_max
    readable = total > 0
    out = acc / np.where(readable, total, 1)
    lse = np.where(readable, running_max + np.log(np.where(readable, total, 1)), -np.inf)
    return out, FlashAttentionCache(q, k, v, out, lse[..., 0], settings.mask, settings.scale,
                                    settings.causal, settings.window, settings.block_size)


@fast_twin
def flash_attention_backward(d_out, cache):
    """-> (d_q, d_k, d_v), recomputing each block's weights from the stored log-sum-exp."""
    q, k, v = cache.q, cache.k, cache.v
    group, M = q.shape[1] // k.shape[1], k.shape[2]
    k_heads, v_heads = repeat_kv(k, group), repeat_kv(v, group)           # [B, H, M, D]
    lse = cache.lse[..., None]
    lse = np.where(np.isfinite(lse), lse, np.inf)                         # unreadable row: p = 0
    delta = np.sum(d_out * cache.out, axis=-1, keepdims=True)             # [B, H, N, 1]
    d_q = np.zeros_like(q)
    d_k_heads, d_v_heads = np.zeros_like(k_heads), np.zeros_like(v_heads)
    for start in range(0, M, cache.block_size):
        keys = slice(start, min(M, start + cache.block_size))
        # forward: p = exp(s - lse), the block's normalised weights
        p = np.exp(block_scores(cache, keys.start, keys.stop) - lse)      # [B, H, N, bk]
        # forward: out = sum over blocks of p @ v
        d_v_heads[:, :, keys] += p.swapaxes(-1, -2) @ d_out
        d_p = d_out @ v_heads[:, :, keys].swapaxes(-1, -2)
        # forward: p = softmax(s) over the whole row; s = q k^T * scale
        d_scores = p * (d_p - delta) * cache.scale
        d_q += d_scores @ k_heads[:, :, keys]
        d_k_heads[:, :, keys] += d_scores.swapaxes(-1, -2) @ q
    return d_q, sum_groups(d_k_heads, group), sum_groups(d_v_heads, group)


class BlockwiseAttention:
    """The attention kernel that reads ``block_size`` keys at a time (``flash_attention_forward``).

    A drop-in for ``t04_attention.DotProductAttention`` inside ``MultiHeadAttention``: no
    [B, H, N, M] table is kept, only a log-sum-exp per query.
    """

    name = "flash"

    def __init__(self, block_size=128):
        self.block_size = check_positive("block_size", block_size)

    def forward(self, q, k, v, mask=None, causal=False, window=None):
        """``flash_attention_forward`` with this kernel's block size."""
        return flash_attention_forward(q, k, v, mask, causal=causal, window=window,
                                       block_size=self.block_size)

    def backward(self, d_out, cache):
        """``flash_attention_backward``."""
        return flash_attention_backward(d_out, cache)


# a config may name it: attention="flash". setdefault: a copy of this file run again (a learner's,
# loaded to be graded) leaves the package's own kernel in the table
ATTENTION_KERNELS.setdefault("flash", BlockwiseAttention)
