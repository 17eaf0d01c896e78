"""ALiBi: attention with linear biases, positions without a position embedding.

RoPE (``t05_rope.py``) turns q and k so that their dot product depends on how far apart two
positions are. ALiBi (the positions of BLOOM and MPT) says the same thing more bluntly: no
table, no rotation; each head penalises a key in proportion to how far back it is:

    scores_h[i, j] = q_i . k_j / sqrt(D) - m_h (i - j)          (i - j >= 0: j at or before i)

The slopes m_h are fixed, not learned: for H heads (a power of 2) the geometric sequence
m_h = 2^(-8 h / H), h = 1 .. H, steep heads that read mostly the last few positions and
gentle ones that read far back. For another H, the slopes of the power of 2 below it, then
every other slope of twice as many heads.

The bias depends on i - j only: moving every position by the same amount changes no score,
so ALiBi, like RoPE, gives attention relative positions (and a model trained on short
sequences can be run on longer ones).

Backward, for the upstream gradient d_out of the biased scores:
    d_scores = d_out                                   (the bias is added)
    d_m_h    = -sum_{b, i, j} d_out[b, h, i, j] (i - j)  (were the slopes learned)

Symbols: the article's positions i (a query) and j (a key); H heads of width D; B sequences,
N queries, M keys (the queries are the last N of M positions, as after cached keys).
``ALiBiAttention`` is the attention kernel of ``MultiHeadAttention`` that adds the bias; a
config names it with ``positions="alibi"``.

No fast twins: everything here runs as written on either track (a ``print`` in it shows).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .core.module import Cache
from .t03_softmax import SoftmaxCache, softmax_backward, softmax_forward
from .core.validate import check_grouped_qkv, check_mask, check_positive, check_window
from .t04_attention import ATTENTION_KERNELS, combine_masks, repeat_kv, sum_groups


def alibi_slopes(n_heads):
    """[H] slopes m_h: 2^(-8 h / H) for h = 1 .. H when H is a power of 2; else those of the
    power of 2 below H, then every other slope of twice as many heads."""
    below = 2 ** int(math.floor(math.log2(check_positive("n_heads", n_heads))))
    slopes = 2.0 ** (-8.0 * np.arange(1, below + 1) / below)
    if below == n_heads:
        return slopes
    twice = 2.0 ** (-8.0 * np.arange(1, 2 * below + 1) / (2 * below))
    return np.concatenate([slopes, twice[0::2][:n_heads - below]])


def distances(n, m):
    """[n, m] of i - j: how far back key j is from query i, the queries being the last n of m
    positions (negative for a key after the query, which the causal rule masks)."""
    return np.arange(m - n, m)[:, None] - np.arange(m)[None, :]


@dataclass(frozen=True)
class AlibiCache(Cache):
    """What alibi_backward needs: how far back each key is, [N, M]."""

    distance: np.ndarray


def alibi_forward(scores, slopes):
    """scores [B, H, N, M], slopes [H] -> (scores - m_h (i - j), cache)."""
    N, M = scores.shape[-2:]
    distance = distances(N, M).astype(scores.dtype)                # [N, M]
    bias = -slopes[:, None, None] * distance                       # [H, N, M]
    return scores + bias, AlibiCache(distance)


def alibi_backward(d_out, cache):
    """-> (d_scores, d_slopes) from d_out [B, H, N, M], the gradient of the biased scores."""
    # forward: biased = scores + bias: the gradient passes to the scores unchanged
    d_scores = d_out
    # forward: bias = -m_h (i - j): each slope collects its head's gradient times -(i - j)
    d_slopes = -(d_out * cache.distance).sum(axis=(0, 2, 3))       # [H]
    return d_scores, d_slopes


# -- the kernel MultiHeadAttention calls with positions="alibi" -----------------------------
@dataclass(frozen=True)
class ALiBiAttentionCache(Cache):
    """The heads, the softmax's cache, the scale and the group size of one call."""

    q: np.ndarray            # [B, H, N, D]
    k: np.ndarray            # [B, H, M, D] (each key/value head repeated for its group)
    v: np.ndarray            # [B, H, M, Dv]
    softmax: SoftmaxCache    # .y: the weights [B, H, N, M]
    alibi: AlibiCache
    scale: float
    group: int

    @property
    def weights(self):
        """The attention weights [B, H, N, M]."""
        return self.softmax.y


class ALiBiAttention:
    """Attention whose scores carry ALiBi's bias: ``forward(q, k, v, mask, causal, window)``
    and ``backward(d_out, cache) -> (d_q, d_k, d_v)``, as ``t04_attention.DotProductAttention``,
    with k and v of H_kv heads (grouped-query attention) and the slopes of q's H heads."""

    name = "alibi"

    def forward(self, q, k, v, mask=None, causal=False, window=None):
        """q [B, H, N, D], k and v [B, H_kv, M, D] -> (out [B, H, N, Dv], cache)."""
        group = check_grouped_qkv(q, k, v)                                # H / H_kv
        keys, values = repeat_kv(k, group), repeat_kv(v, group)           # [B, H, M, D]
        (B, H, N, D), M = q.shape, k.shape[2]
        mask = combine_masks(check_mask(mask, (B, H, N, M)), causal, check_window(window), N, M)
        scale = 1.0 / math.sqrt(D)
        scores = q @ keys.swapaxes(-1, -2) * scale                       # [B, H, N, M]
        biased, alibi = alibi_forward(scores, alibi_slopes(H).astype(q.dtype))   # - m_h (i - j)
        weights, softmax = softmax_forward(biased, mask=mask)
        return weights @ values, ALiBiAttentionCache(q, keys, values, softmax, alibi, scale, group)

    def backward(self, d_out, cache):
        """-> (d_q, d_k, d_v); a shared key/value head receives its group's sum."""
        # forward: out = weights @ values
        d_weights = d_out @ cache.v.swapaxes(-1, -2)                     # [B, H, N, M]
        d_values = cache.weights.swapaxes(-1, -2) @ d_out                # [B, H, M, Dv]
        # forward: weights = softmax(biased)
        d_biased = softmax_backward(d_weights, cache.softmax)
        # forward: biased = scores - m_h (i - j); the slopes are fixed
        d_scores, _ = alibi_backward(d_biased, cache.alibi)
        # forward: scores = q @ keys^T * scale
        d_q = d_scores @ cache.k * cache.scale                           # [B, H, N, D]
        d_keys = d_scores.swapaxes(-1, -2) @ cache.q * cache.scale       # [B, H, M, D]
        # forward: keys, values = repeat_kv(k), repeat_kv(v)
        return d_q, sum_groups(d_keys, cache.group), sum_groups(d_values, cache.group)


# a config names it with positions="alibi". setdefault: a copy of this file run again (a learner's,
# loaded to be graded) leaves the package's own kernel in the table
ATTENTION_KERNELS.setdefault("alibi", ALiBiAttention)
