"""Fast twin of ``npformer.t04_attention``'s scaled dot-product attention.

- The score table is kept keys-major, [B, H, M, N] (the cache's weights are its transposed
  view, [B, H, N, M]): the softmax's max and sum over the keys are then reductions across
  rows, which numpy runs as whole-row vector operations (the max by halving: 3 to 7 times
  faster than ``max(axis=-1)``, which pays a fixed cost per row of 32 to 256 scores), and
  every product is a plain or transposed BLAS call.
- K and V are never repeated for grouped-query attention: the G = H / H_kv query heads of a
  group are an axis of their own, [B, H_kv, G, ...], and read their shared head by
  broadcasting in the batched matmul.
- Causal attention skips what no query reads. The queries are cut into tiles of about 64;
  a tile of queries r0..r1 reads only keys 0 .. r1 (the rest of its weights are 0), so its
  scores, softmax and products cover that part alone, about (T + 1) / 2T of the table for T
  tiles. The backward does the same, tile by tile (dq) and key block by key block (dk, dv);
  the forward's cache says which tiles it skipped (``TiledAttentionCache``), and a cache
  without that (the plain twin's) is read whole.
- 1/sqrt(D) multiplies q (N x D numbers) instead of the scores (N x M).
- The mask is written into the score table itself (the causal table is made once per
  shape and kept) and the softmax runs in place, its sums by BLAS.
- Every product writes straight into its place (``out=``).
- Backward: the softmax's dot over the keys by BLAS, then in place; the scale applied to dq, dk.
- The batch (or, for a single sequence, the key/value heads) is cut into blocks computed
  at once on the cores (``parallel.run_blocks``).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .. import t04_attention as plain
from ..t04_attention import AttentionCache, causal_table, combine_masks
from ..t03_softmax import SoftmaxCache
from ..core.track import twin_of
from ..core.validate import check_mask, check_qkv, check_window, qkv_shapes
from .functional import ones
from .parallel import run_blocks

TILE_ROWS = 64          # queries per tile of causal attention (fewer tiles: fewer calls)


@dataclass(frozen=True)
class TiledAttentionCache(AttentionCache):
    """``AttentionCache`` (which the plain backward reads as it is) and the query tiles the
    fast forward computed: (r0, r1, hi) each, rows r0..r1 read keys 0..hi, their weights
    past hi are 0."""

    tiles: tuple = ()


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


def _tiles(N, M, causal, window):
    """(r0, r1, hi): query rows r0..r1 read keys 0..hi. Causal attention without a window is
    cut into tiles of about ``TILE_ROWS`` queries (the last N of M positions read the keys up
    to their own); anything else is one tile of the whole table."""
    count = N // TILE_ROWS if causal and window is None and M else 1
    if count <= 1:
        return ((0, N, M),)
    edges = [N * t // count for t in range(count + 1)]
    return tuple((r0, r1, max(0, M - N + r1)) for r0, r1 in zip(edges[:-1], edges[1:]))


def _forbidden(mask, causal, window, N, M, H_kv, G):
    """Where no query may read, as 5 axes broadcasting to [B, H_kv, G, N, M]; None when
    nothing is masked, and "causal" when only the causal rule is (the tiles then mask just
    their diagonal part)."""
    if mask is None:
        if not causal and window is None:
            return None
        if window is None:
            return "causal"
        return _causal_forbidden(N, M, window)[None, None, None]
    forbidden = ~combine_masks(mask, causal, window, N, M)
    forbidden = forbidden.reshape((1,) * (4 - forbidden.ndim) + forbidden.shape)
    heads = (H_kv, G) if forbidden.shape[1] > 1 else (1, 1)
    return forbidden.reshape(forbidden.shape[:1] + heads + forbidden.shape[2:])


def _part(mask, batch, kv_heads, r0, r1, lo, hi):
    """The part of a 5-axis mask (axes of size 1 broadcast) for a block and a tile."""
    index = []
    for size, part in zip(mask.shape, (batch, kv_heads, slice(None), slice(r0, r1), slice(lo, hi))):
        index.append(part if size > 1 else slice(None))
    return mask[tuple(index)]


def _max_over_keys(scores):
    """The max over axis -2 of ``scores`` [..., n, r] (n >= 1), as [..., 1, r]: halves folded
    onto each other with ``np.maximum``, each fold one vector pass over whole rows."""
    n = scores.shape[-2]
    half = n // 2
    if not half:
        return scores.copy()
    peak = np.maximum(scores[..., :half, :], scores[..., half:2 * half, :])
    if n % 2:
        np.maximum(peak[..., :1, :], scores[..., n - 1:, :], out=peak[..., :1, :])
    while peak.shape[-2] > 1:
        n = peak.shape[-2]
        half = n // 2
        if n % 2:
            np.maximum(peak[..., :1, :], peak[..., n - 1:, :], out=peak[..., :1, :])
        np.maximum(peak[..., :half, :], peak[..., half:2 * half, :], out=peak[..., :half, :])
        peak = peak[..., :half, :]
    return peak


def _softmax_over_keys(scores):
    """The softmax over axis -2 of keys-major ``scores`` [..., M, N] (masked entries -inf), in
    place; the sums by BLAS (ones @)."""
    peak = _max_over_keys(scores)                               # [..., 1, N]
    peak[~np.isfinite(peak)] = 0                                # fully masked queries
    scores -= peak
    np.exp(scores, out=scores)
    total = ones(scores.shape[-2], scores.dtype) @ scores       # [..., N]
    total[~(total > 0)] = 1                                     # fully masked queries stay 0
    np.reciprocal(total, out=total)                             # one division per query
    scores *= total[..., None, :]


def _grouped(x, batch, heads, shape):
    """x[batch, heads] as [nb, nh, G, n, F] (C-ordered: a copy when x's layout needs one)."""
    return np.ascontiguousarray(x[batch, heads]).reshape(shape)


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
    window = check_window(window)
    forbidden = _forbidden(check_mask(mask, (B, H, N, M)), causal, window, N, M, H_kv, H // H_kv)
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    G, Dv = H // H_kv, v.shape[3]
    tiles = _tiles(N, M, causal, window)
    table = np.empty((B, H, M, N), q.dtype)                                 # keys-major
    out = np.empty((B, H, N, Dv), q.dtype)
    minus_inf = q.dtype.type(-np.inf)

    def work(batch, kv_heads, q_heads):
        keys = k[batch, kv_heads][:, :, None]                                # [nb, nh, 1, M, D]
        values = v[batch, kv_heads][:, :, None]                              # [nb, nh, 1, M, Dv]
        nb, nh = keys.shape[:2]
        scaled = np.empty((nb, nh * G, N, D), q.dtype)
        np.multiply(q[batch, q_heads], q.dtype.type(scale), out=scaled)
        scaled_t = scaled.reshape(nb, nh, G, N, D).swapaxes(-1, -2)          # [nb, nh, G, D, N]
        block = table[batch, q_heads].reshape(nb, nh, G, M, N)             # contiguous: a view
        mixed = out[batch, q_heads].reshape(nb, nh, G, N, Dv)
        for r0, r1, hi in tiles:
            scores = block[..., :hi, r0:r1]                                  # keys 0..hi, queries r0..r1
            np.matmul(keys[..., :hi, :], scaled_t[..., r0:r1], out=scores)
            block[..., hi:, r0:r1] = 0                                        # no query here reads them
            if isinstance(forbidden, str):                                   # causal: the diagonal part
                diagonal = min(max(0, M - N + r0 + 1), hi)
                np.copyto(scores[..., diagonal:, :], minus_inf,
                          where=_causal_forbidden(N, M, None).T[diagonal:hi, r0:r1])
            elif forbidden is not None:
                np.copyto(scores, minus_inf,
                          where=_part(forbidden, batch, kv_heads, r0, r1, 0, hi).swapaxes(-1, -2))
            if scores.size:
                _softmax_over_keys(scores)                                   # scores become the weights
            np.matmul(scores.swapaxes(-1, -2), values[..., :hi, :], out=mixed[..., r0:r1, :])
    _blocks_over(B, H_kv, G, G * N * M, work)
    softmax = SoftmaxCache(table.swapaxes(-1, -2), -1)                      # the weights [B, H, N, M]
    if len(tiles) == 1:
        return out, AttentionCache(q, k, v, softmax, scale)
    return out, TiledAttentionCache(q, k, v, softmax, scale, tiles)


@twin_of(plain.attention_backward)
def attention_backward(d_out, cache):
    """Twin of ``npformer.t04_attention.attention_backward``: the softmax backward in place."""
    return _backward(d_out, cache)


@twin_of(plain.grouped_attention_backward)
def grouped_attention_backward(d_out, cache):
    """Twin of ``npformer.t04_attention.grouped_attention_backward``: grouped GEMMs, each shared
    key/value head's gradient summed by the product itself."""
    return _backward(d_out, cache)


def _key_blocks(tiles):
    """(c0, c1, r0): the keys c0..c1 of one block are read by the queries r0..N only (between
    one tile's last key and the next one's: the first block holds every key before it)."""
    starts = (0,) + tuple(hi for _, _, hi in tiles[:-1])
    return tuple((c0, hi, r0) for c0, (r0, _, hi) in zip(starts, tiles))


def _backward(d_out, cache):
    """(d_q, d_k, d_v) of ``_forward`` (any group size)."""
    q, k, v, weights = cache.q, cache.k, cache.v, cache.weights
    B, H, N, D = q.shape
    H_kv, M = k.shape[1], k.shape[2]
    G, Dv = H // H_kv, v.shape[3]
    tiles = getattr(cache, "tiles", None) or ((0, N, M),)
    scale = q.dtype.type(cache.scale)
    d_q, d_k, d_v = np.empty(q.shape, q.dtype), np.empty(k.shape, k.dtype), np.empty(v.shape, v.dtype)

    def shared_heads(product, out):
        """The G query heads of a group add into their shared key/value head: [.., G, c, F] -> [.., c, F]."""
        if G == 1:
            out[...] = product[:, :, 0]
        else:
            np.add.reduce(product, axis=2, out=out)

    def work(batch, kv_heads, q_heads):
        keys = k[batch, kv_heads][:, :, None]                                # [nb, nh, 1, M, D]
        values = v[batch, kv_heads][:, :, None]                              # [nb, nh, 1, M, Dv]
        nb, nh = keys.shape[:2]
        block = _grouped(weights.swapaxes(-1, -2), batch, q_heads, (nb, nh, G, M, N))   # keys-major
        upstream = _grouped(d_out, batch, q_heads, (nb, nh, G, N, Dv))
        queries = _grouped(q, batch, q_heads, (nb, nh, G, N, D))
        d_scores = np.empty((nb, nh, G, M, N), q.dtype)                     # keys-major
        d_queries = d_q[batch, q_heads].reshape(nb, nh, G, N, D)
        for r0, r1, hi in tiles:
            part, w = d_scores[..., :hi, r0:r1], block[..., :hi, r0:r1]
            np.matmul(values[..., :hi, :], upstream[..., r0:r1, :].swapaxes(-1, -2), out=part)  # d_weights
            dot = ones(hi, q.dtype) @ (part * w)                    # softmax backward: sum_j d_w_j w_j
            part -= dot[..., None, :]
            part *= w                                               # d(scores), before the scale
            np.matmul(part.swapaxes(-1, -2), keys[..., :hi, :], out=d_queries[..., r0:r1, :])
        d_queries *= scale
        d_keys, d_values = d_k[batch, kv_heads], d_v[batch, kv_heads]
        for c0, c1, r0 in _key_blocks(tiles):
            shared_heads(block[..., c0:c1, r0:] @ upstream[..., r0:, :], d_values[..., c0:c1, :])
            shared_heads(d_scores[..., c0:c1, r0:] @ queries[..., r0:, :], d_keys[..., c0:c1, :])
        d_keys *= scale
    _blocks_over(B, H_kv, G, 2 * G * N * M, work)
    return d_q, d_k, d_v
