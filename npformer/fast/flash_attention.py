"""Fast twin of ``npformer.t18_flash_attention``: the blockwise attention tiled for speed.

- Query heads of a group are stacked position-major as [B, H_kv, N*G, D], so the queries at
  positions r0..r1 are one contiguous slice and each group reads its shared K/V head by a
  plain matmul (no repeated K and V).
- A tile whose queries cannot read any of its keys (causal, window) is skipped, and only the
  rows that can read a tile are computed.
- Scores, exponentials and the running sums are updated in place.
"""
from __future__ import annotations

import numpy as np

from .. import t18_flash_attention as plain
from ..t04_attention import may_read
from ..t18_flash_attention import FlashAttentionCache, flash_settings
from ..core.track import twin_of


# -- layout helpers ------------------------------------------------------------------------
def _grouped(x, H_kv):
    """[B, H, N, F] -> [B, H_kv, N*G, F], row n*G + g = query head g of group, position n.

    Position-major rows make "the queries at positions r0..r1" one contiguous
    slice [r0*G : r1*G], and each group reads its shared K/V head by a plain matmul.
    """
    B, H, N, F = x.shape
    G = H // H_kv
    return np.ascontiguousarray(x.reshape(B, H_kv, G, N, F).swapaxes(2, 3)).reshape(B, H_kv, N * G, F)


def _ungrouped(x, H):
    """The inverse of ``_grouped``: [B, H_kv, N*G, F] -> [B, H, N, F]."""
    B, H_kv, NG, F = x.shape
    G = H // H_kv
    return np.ascontiguousarray(x.reshape(B, H_kv, NG // G, G, F).swapaxes(2, 3)).reshape(B, H, NG // G, F)


def _query_range(c, j0, j1, N, M):
    """Positions r0..r1 of the queries that can read any key in j0..j1 (causal / window)."""
    offset = M - N                                  # queries are the last N of M positions
    r0, r1 = 0, N
    if c.causal or c.window is not None:
        r0 = max(0, j0 - offset)
    if c.window is not None:
        r1 = min(N, j1 - 1 + c.window - offset)
    return r0, max(r0, r1)


def _block_allowed(c, r0, r1, j0, j1, G):
    """Boolean [B or 1, H_kv or 1, (r1-r0)*G, j1-j0] "may read" table of one tile, or None (all True)."""
    N, M = c.q.shape[2], c.k.shape[2]
    allowed = None
    if c.causal or c.window is not None:
        query_pos = np.repeat(np.arange(r0, r1) + (M - N), G)[:, None]     # [(r1-r0)*G, 1]
        allowed = may_read(query_pos, np.arange(j0, j1)[None, :], c.window)
        allowed = None if allowed.all() else allowed
    if c.mask is not None:
        B, H = c.q.shape[:2]
        H_kv = c.k.shape[1]
        tile = np.broadcast_to(c.mask, (B, H, N, M))[:, :, r0:r1, j0:j1]
        tile = _grouped(tile, H_kv)                                         # [B, H_kv, rows, cols]
        allowed = tile if allowed is None else allowed & tile
    return allowed


# -- forward --------------------------------------------------------------------------------
@twin_of(plain.flash_attention_forward)
def flash_attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None, block_size=128):
    """Twin of ``npformer.t18_flash_attention.flash_attention_forward``: grouped rows, tiles skipped
    where the causal rule leaves nothing to read, the online softmax updated in place.

    The cache keeps ``out`` itself (backward reads it): do not modify it in place.
    """
    c = flash_settings(q, k, v, mask, scale, causal, window, block_size)
    B, H, N, D = q.shape
    H_kv, M, Dv = k.shape[1], k.shape[2], v.shape[3]
    G = H // H_kv
    dtype = q.dtype
    block_size, scale = c.block_size, c.scale
    rows = _grouped(q, H_kv)                                  # [B, H_kv, N*G, D]
    running_max = np.full((B, H_kv, N * G, 1), -np.inf, dtype)
    total = np.zeros((B, H_kv, N * G, 1), dtype)              # l: running denominator
    acc = np.zeros((B, H_kv, N * G, Dv), dtype)               # running sum of weights @ V
    for j0 in range(0, M, block_size):
        j1 = min(M, j0 + block_size)
        r0, r1 = _query_range(c, j0, j1, N, M)
        if r0 >= r1:
            continue
        sl = slice(r0 * G, r1 * G)
        scores = rows[:, :, sl] @ k[:, :, j0:j1].swapaxes(-1, -2)   # [B, H_kv, R, bk]
        scores *= dtype.type(scale)
        allowed = _block_allowed(c, r0, r1, j0, j1, G)
        if allowed is not None:
            np.copyto(scores, -np.inf, where=~allowed)
        block_max = scores.max(axis=-1, keepdims=True)
        new_max = np.maximum(running_max[:, :, sl], block_max)
        safe_max = np.where(np.isfinite(new_max), new_max, 0).astype(dtype, copy=False)
        scores -= safe_max
        weights = np.exp(scores, out=scores)                  # unnormalised, in place
        rescale = np.exp(running_max[:, :, sl] - safe_max)    # exp(m - m_new); 0 when m = -inf
        total[:, :, sl] *= rescale
        total[:, :, sl] += weights.sum(axis=-1, keepdims=True)
        acc[:, :, sl] *= rescale
        acc[:, :, sl] += weights @ v[:, :, j0:j1]
        running_max[:, :, sl] = new_max
    readable = total > 0
    acc /= np.where(readable, total, 1)
    with np.errstate(divide="ignore"):
        lse = np.where(readable, running_max + np.log(np.where(readable, total, 1)), -np.inf)
    out = _ungrouped(acc, H)                                   # [B, H, N, Dv]
    lse = _ungrouped(lse.astype(dtype, copy=False), H)[..., 0]  # [B, H, N]
    return out, FlashAttentionCache(q, k, v, out, lse, c.mask, scale, c.causal, c.window, block_size)


# -- backward --------------------------------------------------------------------------------
@twin_of(plain.flash_attention_backward)
def flash_attention_backward(d_out, cache):
    """Twin of ``npformer.t18_flash_attention.flash_attention_backward``: grouped rows, in place."""
    c = cache
    q, k, v = c.q, c.k, c.v
    B, H, N, D = q.shape
    H_kv, M = k.shape[1], k.shape[2]
    G = H // H_kv
    dtype = q.dtype
    scale = dtype.type(c.scale)
    rows = _grouped(q, H_kv)                                   # [B, H_kv, N*G, D]
    d_rows = _grouped(d_out, H_kv)                             # [B, H_kv, N*G, Dv]
    lse = _grouped(c.lse[..., None], H_kv)                     # [B, H_kv, N*G, 1]
    lse = np.where(np.isfinite(lse), lse, np.inf).astype(dtype, copy=False)   # unreadable row: p = 0
    # D_i = sum_j dp_ij p_ij = sum_d dout_id out_id: one reduction over the head width.
    delta = np.sum(d_rows * _grouped(c.out, H_kv), axis=-1, keepdims=True)   # [B, H_kv, N*G, 1]
    dq = np.zeros_like(rows)
    dk, dv = np.zeros_like(k), np.zeros_like(v)
    for j0 in range(0, M, c.block_size):
        j1 = min(M, j0 + c.block_size)
        r0, r1 = _query_range(c, j0, j1, N, M)
        if r0 >= r1:
            continue
        sl = slice(r0 * G, r1 * G)
        scores = rows[:, :, sl] @ k[:, :, j0:j1].swapaxes(-1, -2)            # [B, H_kv, R, bk]
        scores *= scale
        allowed = _block_allowed(c, r0, r1, j0, j1, G)
        if allowed is not None:
            np.copyto(scores, -np.inf, where=~allowed)
        scores -= lse[:, :, sl]
        weights = np.exp(scores, out=scores)                                  # p, in place
        dv[:, :, j0:j1] += weights.swapaxes(-1, -2) @ d_rows[:, :, sl]
        d_scores = d_rows[:, :, sl] @ v[:, :, j0:j1].swapaxes(-1, -2)         # dp
        d_scores -= delta[:, :, sl]
        d_scores *= weights
        d_scores *= scale                                                     # ds
        dq[:, :, sl] += d_scores @ k[:, :, j0:j1]
        dk[:, :, j0:j1] += d_scores.swapaxes(-1, -2) @ rows[:, :, sl]
    return _ungrouped(dq, H), dk, dv
