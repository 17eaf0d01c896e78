"""Attention: each position reads the others, weighted by how well its query matches their keys.

The article writes, for one head with queries Q [N, d_k], keys K [M, d_k], values V [M, d_v]
and an additive mask M:

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V

Here with the batch and the heads in front (the article's d_k is our D, the head width):

    scores  = q k^T / sqrt(D)                    [B, H, N, M]   (N queries, M keys)
    weights = softmax(scores) where may_read     [B, H, N, M]   (each row sums to 1)
    out     = weights v                          [B, H, N, Dv]

The masks here are boolean and mean "may read": True where query i may read key j. The
article's M is the same limit written additively, 0 where reading is allowed and -inf
where it is not; exp(-inf) = 0, so both give a forbidden key weight exactly 0. A query
row with no readable key gets all-zero weights and a zero output (never NaN).

Backward, for the upstream gradient d_out. ``d_x`` always means dL/dx, the gradient of
x: ``d_k`` below is the gradient of the keys k, not the article's key width d_k (our D).

    d_weights = d_out v^T                d_v = weights^T d_out
    d_scores  = weights * (d_weights - sum_j d_weights_j weights_j)     (softmax backward)
    d_q = d_scores k / sqrt(D)           d_k = d_scores^T q / sqrt(D)

The file in the article's order: the causal rule and the masks; scaled dot-product
attention; multi-head attention (split into heads, attend, merge, Wo); then a variant,
grouped-query attention (H query heads share H_kv key/value heads; H_kv = 1 is
multi-query attention).

Fast twins: ``attention_forward``, ``attention_backward``, ``grouped_attention_forward``
and ``grouped_attention_backward`` have drop-in twins in ``npformer/fast/attention.py``,
which run only under ``npformer.track("fast")``. By default the functions written here
run: a ``print`` in them shows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .t03_softmax import SoftmaxCache, softmax_backward, softmax_forward
from .t02_linear import Linear
from .core.module import Cache, Module
from .core.track import fast_twin
from .core.validate import (check_grouped_qkv, check_heads, check_mask, check_positive, check_qkv,
                            check_rng, check_window)


# -- masks ------------------------------------------------------------------------
def may_read(query_pos, key_pos, window=None):
    """The causal rule: a query at ``query_pos`` may read a key at ``key_pos`` at or before it,
    and with a ``window`` only the ``window`` most recent ones (itself included).

    The positions broadcast against each other (e.g. [n, 1] and [1, m] give an [n, m] table).
    """
    allowed = key_pos <= query_pos
    if window is not None:
        allowed = allowed & (key_pos > query_pos - window)
    return allowed


def causal_table(n, m=None, window=None):
    """[n, m] ``may_read`` table of the last n of m positions reading all m (queries after
    m - n cached keys sit at positions m - n .. m - 1)."""
    m = n if m is None else m
    return may_read(np.arange(m - n, m)[:, None], np.arange(m)[None, :], window)


def causal_mask(n, m=None):
    """[n, m] table: query i (the last n of m positions) may read key j <= its own position.

    With m = n this is the lower triangle, diagonal included (each position
    reads itself and earlier ones).
    """
    return causal_table(*_check_table(n, m))


def sliding_window_mask(n, window, m=None):
    """Causal, and at most the ``window`` most recent keys (itself included): [n, m]."""
    if window is None:
        raise ValueError("window: expected an integer >= 1, got None")
    return causal_table(*_check_table(n, m), check_window(window))


def _check_table(n, m):
    """n queries (>= 1) among m positions (None: n; else >= n)."""
    check_positive("n", n)
    if m is not None and (isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < n):
        raise ValueError(f"m: expected an integer >= n={n} (the queries are the last n of m "
                         f"positions) or None, got {m!r}")
    return n, m


def padding_mask(lengths=None, n=None, key_mask=None, side="right"):
    """Which keys are real tokens, as [B, 1, 1, N] for broadcasting over heads and queries.

    Give either ``lengths`` [B] (with the padded length ``n`` and the padding
    ``side``, "right": tokens first, "left": padding first) or a boolean
    ``key_mask`` [B, N] that is True at real tokens.
    """
    if key_mask is not None:
        key_mask = np.asarray(key_mask)
        if key_mask.dtype != bool or key_mask.ndim != 2:
            raise ValueError(f"key_mask: expected a boolean [B, N] array, got {key_mask.dtype} "
                             f"of shape {key_mask.shape}")
        return key_mask[:, None, None, :]
    if lengths is None or n is None:
        raise ValueError("padding_mask: give lengths and n, or key_mask")
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or (lengths < 0).any() or (lengths > n).any():
        raise ValueError(f"lengths: expected a [B] array of values in [0, {n}], got {lengths}")
    j = np.arange(n)[None, :]
    if side == "right":
        real = j < lengths[:, None]
    elif side == "left":
        real = j >= n - lengths[:, None]
    else:
        raise ValueError(f"side: expected 'right' or 'left', got {side!r}")
    return real[:, None, None, :]


def combine_masks(mask, causal, window, n, m):
    """``mask`` and the causal rule as one "may read" table, or None when nothing is masked."""
    if not causal and window is None:
        return mask
    reach = causal_table(n, m, window)                     # [n, m]
    return reach if mask is None else mask & reach


# -- scaled dot-product attention ----------------------------------------------------
@dataclass(frozen=True)
class AttentionCache(Cache):
    """What attention_forward keeps for its backward: the inputs and the weights."""

    q: np.ndarray            # [B, H, N, D]
    k: np.ndarray            # [B, H, M, D]   ([B, H_kv, M, D] in grouped-query attention)
    v: np.ndarray            # [B, H, M, Dv]  ([B, H_kv, M, Dv] likewise)
    softmax: SoftmaxCache    # .y: the weights [B, H, N, M]
    scale: float

    @property
    def weights(self):
        """The attention weights [B, H, N, M] (each row sums to 1, or is 0 when fully masked)."""
        return self.softmax.y


@fast_twin
def attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None):
    """q [B, H, N, D], k [B, H, M, D], v [B, H, M, Dv] -> out [B, H, N, Dv]: softmax(q k^T / sqrt(D)) v.

    ``mask`` ("may read", boolean) broadcasts to [B, H, N, M]. ``causal`` (and ``window``)
    add the causal rule for queries that are the last N of M positions. ``scale`` defaults
    to 1/sqrt(D). The weights are in ``cache.weights``.
    """
    B, H, N, D, M = check_qkv(q, k, v)
    mask = combine_masks(check_mask(mask, (B, H, N, M)), causal, check_window(window), N, M)
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    scores = q @ k.swapaxes(-1, -2) * scale                        # [B, H, N, M]
    weights, softmax = softmax_forward(scores, mask=mask)          # [B, H, N, M]
    out = weights @ v                                              # [B, H, N, Dv]
    return out, AttentionCache(q, k, v, softmax, scale)


@fast_twin
def attention_backward(d_out, cache):
    """-> (d_q, d_k, d_v) from d_out [B, H, N, Dv]."""
    q, k, v, weights, scale = cache.q, cache.k, cache.v, cache.weights, cache.scale
    # forward: out = weights @ v
    d_weights = d_out @ v.swapaxes(-1, -2)                         # [B, H, N, M]
    d_v = weights.swapaxes(-1, -2) @ d_out                         # [B, H, M, Dv]
    # forward: weights = softmax(scores) (masked entries: weight 0, gradient 0)
    d_scores = softmax_backward(d_weights, cache.softmax)          # [B, H, N, M]
    # forward: scores = q @ k^T * scale
    d_q = d_scores @ k * scale                                     # [B, H, N, D]
    d_k = d_scores.swapaxes(-1, -2) @ q * scale                    # [B, H, M, D]
    return d_q, d_k, d_v


# -- multi-head attention --------------------------------------------------------------
@dataclass(frozen=True)
class MultiHeadCache(Cache):
    """The caches of a multi-head call: projection, rotations, the kernel's, output projection."""

    qkv: Cache
    q_rope: Cache | None
    k_rope: Cache | None
    attn: Cache          # the kernel's cache (AttentionCache with the plain kernel)
    out: Cache
    cached_decode: bool

    @property
    def weights(self):
        """Attention weights [B, H, N, M] of this call."""
        return self.attn.weights


class MultiHeadAttention(Module):
    """x [B, N, d] -> [B, N, d]: Q, K, V from one fused projection, H heads, merged, Wo.

    One Linear ``qkv`` produces [Q | K | V], H heads of width D = d / H each (the article's
    multi-head attention); with ``n_kv_heads`` = H_kv < H, K and V have H_kv heads
    (grouped-query attention, the variant below): [H*D | H_kv*D | H_kv*D] features.
    ``out`` is Wo. ``rope`` (a ``Rotary``) rotates Q and K at their positions.
    ``causal`` and ``window`` apply the causal rule (``may_read``) inside the kernel;
    ``mask`` in ``forward`` adds any other limit (usually padding, [B, 1, 1, M]).
    ``kernel`` computes attention from the heads: ``DotProductAttention()`` (default)
    or ``t18_flash_attention.BlockwiseAttention()``. ``rng``: the Generator the weights
    are drawn from (None: ``np.random.default_rng(0)``).
    """

    def __init__(self, d, n_heads, n_kv_heads=None, bias=False, rope=None, window=None,
                 rng=None, dtype=np.float32, out_std=None, kernel=None, causal=False):
        n_kv_heads, rng = check_heads(d, n_heads, n_kv_heads), check_rng(rng)
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, d // n_heads
        self.window, self.causal = check_window(window), causal
        self.kernel = DotProductAttention() if kernel is None else kernel
        self.qkv = Linear(d, (n_heads + 2 * n_kv_heads) * self.head_dim, bias, rng, dtype=dtype)
        self.out = Linear(d, d, bias, rng, std=out_std, dtype=dtype)
        self.rope = rope

    def split_heads(self, qkv):
        """[B, N, (H + 2 H_kv) D] -> q [B, H, N, D], k and v [B, H_kv, N, D]."""
        B, N, _ = qkv.shape
        H, H_kv, D = self.n_heads, self.n_kv_heads, self.head_dim
        heads = qkv.reshape(B, N, H + 2 * H_kv, D)             # [B, N, heads, D]
        heads = heads.transpose(0, 2, 1, 3)                    # [B, heads, N, D]
        return heads[:, :H], heads[:, H:H + H_kv], heads[:, H + H_kv:]

    def merge_heads(self, mixed):
        """[B, H, N, D] -> [B, N, H*D]: the heads side by side again."""
        B, H, N, D = mixed.shape
        return mixed.transpose(0, 2, 1, 3).reshape(B, N, H * D)

    def forward(self, x, mask=None, positions=None, kv=None):
        """x [B, N, d] -> (y [B, N, d], cache). ``mask`` broadcasts to [B, H, N, M];
        ``positions`` [N] or [B, N] for RoPE; ``kv`` one layer of a ``KVCache``
        (``t13_kv_cache``) for incremental decoding."""
        N = x.shape[1]
        qkv, qkv_cache = self.qkv.forward(x)                   # x [Wq | Wk | Wv]: [B, N, (H + 2 H_kv) D]
        q, k, v = self.split_heads(qkv)
        q_rope = k_rope = None
        if self.rope is not None:
            if positions is None:
                start = 0 if kv is None else kv.length
                positions = np.arange(start, start + N)
            q, q_rope = self.rope.forward(q, positions=positions)
            k, k_rope = self.rope.forward(k, positions=positions)
        if kv is not None:                                     # every key so far a query may read
            k, v, mask = kv.extend(k, v, mask, self.window)    # [B, H_kv, M, D]
        mixed, attn = self.kernel.forward(q, k, v, mask, causal=self.causal, window=self.window)
        y, out = self.out.forward(self.merge_heads(mixed))     # [B, N, d]
        return y, MultiHeadCache(qkv_cache, q_rope, k_rope, attn, out, kv is not None)

    def backward(self, d_out, cache):
        """d_x [B, N, d] from d_out; adds into the Q/K/V and output projections' gradients."""
        if cache.cached_decode:
            raise NotImplementedError("backward through a KV-cached decode step is not "
                                      "supported: the KV cache is for inference")
        d_merged = self.out.backward(d_out, cache.out)          # undoes y = merged Wo: [B, N, H*D]
        B, N, _ = d_merged.shape
        # undoes merged = merge_heads(mixed)
        d_mixed = d_merged.reshape(B, N, self.n_heads, self.head_dim).transpose(0, 2, 1, 3)
        d_q, d_k, d_v = self.kernel.backward(d_mixed, cache.attn)   # undoes mixed = Attn(q, k, v)
        if self.rope is not None:                               # undoes the rotation of q and k
            d_q = self.rope.backward(d_q, cache.q_rope)
            d_k = self.rope.backward(d_k, cache.k_rope)
        # undoes q, k, v = split_heads(qkv)
        d_heads = np.concatenate([d_q, d_k, d_v], axis=1)      # [B, H + 2 H_kv, N, D]
        d_qkv = d_heads.transpose(0, 2, 1, 3).reshape(B, N, -1)
        return self.qkv.backward(d_qkv, cache.qkv)             # undoes qkv = x [Wq | Wk | Wv]


# -- a variant: grouped-query attention (GQA, and MQA with H_kv = 1) ------------------------
def repeat_kv(x, group):
    """[B, H_kv, M, F] -> [B, H, M, F]: each key/value head once per query head of its group
    (query head h reads key/value head h // group)."""
    return x if group == 1 else np.repeat(x, group, axis=1)


def sum_groups(d_x, group):
    """The backward of ``repeat_kv``: each shared key/value head sums its group's gradients."""
    if group == 1:
        return d_x
    B, H, M, F = d_x.shape
    return d_x.reshape(B, H // group, group, M, F).sum(axis=2)


@fast_twin
def grouped_attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None):
    """q [B, H, N, D], k [B, H_kv, M, D], v [B, H_kv, M, Dv] -> out [B, H, N, Dv]: attention
    with each key/value head shared by H / H_kv query heads (H_kv = H is plain attention)."""
    group = check_grouped_qkv(q, k, v)                             # H / H_kv
    out, cache = attention_forward(q, repeat_kv(k, group), repeat_kv(v, group), mask, scale,
                                   causal, window)
    return out, replace(cache, k=k, v=v)                           # the shared heads, not copies


@fast_twin
def grouped_attention_backward(d_out, cache):
    """-> (d_q, d_k, d_v); a shared key/value head receives the sum of its group's gradients."""
    group = cache.q.shape[1] // cache.k.shape[1]
    # forward: out = attention(q, repeat_kv(k), repeat_kv(v))
    repeated = replace(cache, k=repeat_kv(cache.k, group), v=repeat_kv(cache.v, group))
    d_q, d_k_heads, d_v_heads = attention_backward(d_out, repeated)
    # forward: k_heads, v_heads = repeat_kv(k), repeat_kv(v)
    return d_q, sum_groups(d_k_heads, group), sum_groups(d_v_heads, group)


def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
    """(out, weights) of attention, for inspection without a backward; k and v may have
    fewer heads than q (grouped-query attention)."""
    out, cache = grouped_attention_forward(q, k, v, mask, scale)
    return out, cache.weights


# -- the kernel MultiHeadAttention calls between splitting and merging the heads ------------
class DotProductAttention:
    """The attention kernel that builds the whole [B, H, N, M] score table at once.

    ``forward(q, k, v, mask, causal, window) -> (out, cache)`` and
    ``backward(d_out, cache) -> (d_q, d_k, d_v)``, with k and v of H_kv heads (H_kv = H is
    plain multi-head attention). ``t18_flash_attention.BlockwiseAttention`` computes the
    same thing a block of keys at a time.
    """

    name = "plain"

    def forward(self, q, k, v, mask=None, causal=False, window=None):
        """``grouped_attention_forward``, the causal rule applied to the last N of M positions."""
        return grouped_attention_forward(q, k, v, mask, causal=causal, window=window)

    def backward(self, d_out, cache):
        """``grouped_attention_backward``: (d_q, d_k, d_v)."""
        return grouped_attention_backward(d_out, cache)


# The kernels a config may name (``BlockConfig.attention``); a later file adds its own (the
# blockwise kernel of ``t18_flash_attention``, ALiBi's of ``t21_alibi``).
ATTENTION_KERNELS = {"plain": DotProductAttention}
