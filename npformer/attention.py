"""Scaled dot-product attention, its masks, and multi-head (and grouped-query) attention.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(D) + M) V

Masks are boolean and mean "may read": True where query i may read key j.
They broadcast against the score table [B, H, N, M] (N queries, M keys), and
combine with ``&``. A query row with no readable key gets all-zero weights and
a zero output (never NaN).

Grouped-query attention (GQA): H query heads share H_kv key/value heads; query
head h reads key/value head h // (H / H_kv). H_kv = H is ordinary multi-head
attention, H_kv = 1 is multi-query attention (MQA).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .flash_attention import flash_attention_backward, flash_attention_forward
from .functional import softmax_inplace
from .linear import Linear
from .module import Cache, Module, check_mask, check_qkv, check_window


# -- masks ------------------------------------------------------------------------
def causal_mask(n, m=None):
    """[n, m] table: query i (the last n of m positions) may read key j <= its own position.

    With m = n this is the lower triangle, diagonal included (each position
    reads itself and earlier ones). With m > n (new queries after m - n cached
    keys) query i sits at absolute position m - n + i.
    """
    m = n if m is None else m
    return np.arange(m)[None, :] <= np.arange(m - n, m)[:, None]


def sliding_window_mask(n, window, m=None):
    """Causal, and at most the ``window`` most recent keys (itself included): [n, m]."""
    if not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"window: expected an integer >= 1, got {window!r}")
    m = n if m is None else m
    query_pos = np.arange(m - n, m)[:, None]
    key_pos = np.arange(m)[None, :]
    return (key_pos <= query_pos) & (key_pos > query_pos - window)


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


# -- scaled dot-product attention ----------------------------------------------------
@dataclass(frozen=True)
class AttentionCache(Cache):
    q: np.ndarray        # [B, H, N, D]
    k: np.ndarray        # [B, H_kv, M, D]
    v: np.ndarray        # [B, H_kv, M, Dv]
    weights: np.ndarray  # [B, H, N, M], the softmax output, kept for inspection
    scale: float


def check_heads(d, n_heads, n_kv_heads=None):
    """Validate a head layout; returns n_kv_heads (None means one K/V head per query head)."""
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    if n_heads < 1 or d % n_heads:
        raise ValueError(f"n_heads: width d={d} must be divisible by the number of heads, "
                         f"got n_heads={n_heads}")
    if n_kv_heads < 1 or n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads: n_heads={n_heads} must be divisible by n_kv_heads, "
                         f"got n_kv_heads={n_kv_heads}")
    return n_kv_heads


def attention_forward(q, k, v, mask=None, scale=None):
    """q [B, H, N, D], k [B, H_kv, M, D], v [B, H_kv, M, Dv] -> out [B, H, N, Dv].

    ``scale`` defaults to 1/sqrt(D). The weights are in ``cache.weights``.
    The H / H_kv query heads of a group are stacked as [B, H_kv, G*N, D] so a
    single batched matmul serves grouped-query attention without copying K, V.
    """
    B, H, N, D, H_kv, M = check_qkv(q, k, v)
    mask = check_mask(mask, (B, H, N, M))
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    G = H // H_kv
    # Scaling q (N x D) instead of the scores (N x M) is the same product, fewer multiplications.
    grouped = (q * q.dtype.type(scale)).reshape(B, H_kv, G * N, D)
    scores = grouped @ k.swapaxes(-1, -2)                   # [B, H_kv, G*N, M]
    weights = scores.reshape(B, H, N, M)                    # the same memory, one table
    if mask is not None:
        np.copyto(weights, q.dtype.type(-np.inf), where=~mask)
    softmax_inplace(weights)                                # scores become the weights
    out = (weights.reshape(B, H_kv, G * N, M) @ v).reshape(B, H, N, -1)   # [B, H, N, Dv]
    return out, AttentionCache(q, k, v, weights, scale)


def attention_backward(d_out, cache):
    """-> (dq, dk, dv); a shared K/V head receives the sum of its group's gradients."""
    q, k, v, weights = cache.q, cache.k, cache.v, cache.weights
    B, H, N, D = q.shape
    H_kv, M = k.shape[1], k.shape[2]
    G = H // H_kv
    d_out_g = d_out.reshape(B, H_kv, G * N, -1)
    weights_g = weights.reshape(B, H_kv, G * N, M)
    dv = weights_g.swapaxes(-1, -2) @ d_out_g                # [B, H_kv, M, Dv]
    d_scores = d_out_g @ v.swapaxes(-1, -2)                  # d_weights [B, H_kv, G*N, M]
    # softmax backward, in place: ds_j = w_j (dw_j - sum_k dw_k w_k)
    row_dot = np.einsum("...j,...j->...", d_scores, weights_g)[..., None]   # [B, H_kv, G*N, 1]
    d_scores -= row_dot
    d_scores *= weights_g                                   # d(scores), before the scale
    scale = q.dtype.type(cache.scale)
    dq = (d_scores @ k).reshape(B, H, N, D)
    dq *= scale
    dk = d_scores.swapaxes(-1, -2) @ q.reshape(B, H_kv, G * N, D)   # [B, H_kv, M, D]
    dk *= scale
    return dq, dk, dv


def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
    """(out, weights) of ``attention_forward``, for inspection without a backward."""
    out, cache = attention_forward(q, k, v, mask, scale)
    return out, cache.weights


# -- multi-head attention --------------------------------------------------------------
@dataclass(frozen=True)
class MultiHeadCache(Cache):
    qkv: Cache
    q_rope: Cache | None
    k_rope: Cache | None
    attn: Cache          # AttentionCache, or FlashAttentionCache with attention="flash"
    out: Cache
    cached_decode: bool

    @property
    def weights(self):
        """Attention weights [B, H, N, M] of this call."""
        return self.attn.weights


class MultiHeadAttention(Module):
    """x [B, N, d] -> [B, N, d]: fused Q/K/V projection, H heads (H_kv for K/V), Wo.

    One Linear ``qkv`` produces [Q | K | V] = [H*D | H_kv*D | H_kv*D] features;
    ``out`` is Wo. ``rope`` (a ``Rotary``) rotates Q and K at their positions.
    ``window`` limits reading to the last ``window`` keys when decoding with a
    KV cache (the mask passed in must already encode it for full sequences).
    ``attention="flash"`` computes the same thing blockwise (``flash_attention``):
    no [B, H, N, M] score table is kept, only a log-sum-exp per query. There
    ``causal`` (and ``window``) are applied per block from positions, so ``mask``
    need only carry padding; the plain path reads every limit from ``mask``.
    """

    ATTENTIONS = ("plain", "flash")

    def __init__(self, d, n_heads, n_kv_heads=None, bias=False, rope=None, window=None,
                 rng=None, dtype=np.float32, out_std=None, attention="plain", causal=False):
        n_kv_heads = check_heads(d, n_heads, n_kv_heads)
        check_window(window)
        if attention not in self.ATTENTIONS:
            raise ValueError(f"attention: expected one of {self.ATTENTIONS}, got {attention!r}")
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, d // n_heads
        self.window, self.attention, self.causal = window, attention, causal
        self.qkv = Linear(d, (n_heads + 2 * n_kv_heads) * self.head_dim, bias, rng, dtype=dtype)
        self.out = Linear(d, d, bias, rng, std=out_std, dtype=dtype)
        self.rope = rope

    def split_heads(self, qkv):
        """[B, N, (H + 2 H_kv) D] -> q [B, H, N, D], k and v [B, H_kv, N, D] (views)."""
        B, N, _ = qkv.shape
        H, H_kv, D = self.n_heads, self.n_kv_heads, self.head_dim
        heads = qkv.reshape(B, N, H + 2 * H_kv, D).transpose(0, 2, 1, 3)
        return heads[:, :H], heads[:, H:H + H_kv], heads[:, H + H_kv:]

    def forward(self, x, mask=None, positions=None, kv=None):
        """``mask`` broadcasts to [B, H, N, M]; ``positions`` [N] or [B, N] for RoPE;
        ``kv`` a per-layer view of a ``KVCache`` for incremental decoding."""
        B, N, _ = x.shape
        qkv, qkv_cache = self.qkv.forward(x)
        q, k, v = self.split_heads(qkv)
        q_rope = k_rope = None
        if self.rope is not None:
            if positions is None:
                positions = np.arange(N) if kv is None else np.arange(kv.length, kv.length + N)
            q, q_rope = self.rope.forward(q, positions=positions)
            k, k_rope = self.rope.forward(k, positions=positions)
        if kv is not None:
            k, v = kv.write(k, v)                           # all cached keys [B, H_kv, M, D]
            if self.window is not None:                     # read only the last `window` keys
                first = max(0, k.shape[2] - N - self.window + 1)
                k, v = k[:, :, first:], v[:, :, first:]
                if mask is not None:
                    mask = mask[..., first:]
        if self.attention == "flash":
            window = self.window if self.causal else None
            mixed, attn_cache = flash_attention_forward(q, k, v, mask, causal=self.causal,
                                                        window=window)    # [B, H, N, D]
        else:
            mixed, attn_cache = attention_forward(q, k, v, mask)          # [B, H, N, D]
        merged = mixed.transpose(0, 2, 1, 3).reshape(B, N, -1)       # [B, N, H*D]
        y, out_cache = self.out.forward(merged)
        return y, MultiHeadCache(qkv_cache, q_rope, k_rope, attn_cache, out_cache, kv is not None)

    def backward(self, d_y, cache):
        if cache.cached_decode:
            raise NotImplementedError("backward through a KV-cached decode step is not "
                                      "supported: the KV cache is for inference")
        d_merged = self.out.backward(d_y, cache.out)                 # [B, N, H*D]
        B, N, _ = d_merged.shape
        H, H_kv, D = self.n_heads, self.n_kv_heads, self.head_dim
        d_mixed = d_merged.reshape(B, N, H, D).transpose(0, 2, 1, 3)
        if self.attention == "flash":
            dq, dk, dv = flash_attention_backward(d_mixed, cache.attn)
        else:
            dq, dk, dv = attention_backward(d_mixed, cache.attn)
        if self.rope is not None:
            dq = self.rope.backward(dq, cache.q_rope)
            dk = self.rope.backward(dk, cache.k_rope)
        d_qkv = np.empty((B, N, (H + 2 * H_kv) * D), d_y.dtype)
        d_heads = d_qkv.reshape(B, N, H + 2 * H_kv, D)              # a view: fill it in place
        d_heads[:, :, :H] = dq.transpose(0, 2, 1, 3)
        d_heads[:, :, H:H + H_kv] = dk.transpose(0, 2, 1, 3)
        d_heads[:, :, H + H_kv:] = dv.transpose(0, 2, 1, 3)
        return self.qkv.backward(d_qkv, cache.qkv)
