"""Cross-attention: queries from one sequence, keys and values from another.

In the article's translation example the queries come from the sentence being written
and the keys and values from the encoded sentence being read:

    Q = x Wq          [B, N, H*D]     (the decoder stream)
    [K | V] = memory Wkv              (the encoder output, M positions)
    out = softmax(Q K^T / sqrt(D)) V Wo, softmax over the source positions the mask lets
          each query read (a boolean "may read" mask, usually the source padding)

It is the attention of ``t04_attention.py`` with Q and K/V projected from different
inputs, so every target position may read every (real) source position; no causal rule.
Backward runs the attention kernel's backward, then both projections: x receives the
query projection's gradient, the memory the key/value projection's (``d_x`` means dL/dx).

No fast twins here: the kernel and the projections call the twins named in
``t04_attention.py`` and ``t02_linear.py``; everything else runs as written.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .t04_attention import DotProductAttention
from .t02_linear import Linear
from .core.module import Cache, Module
from .core.validate import (check_float, check_heads, check_mask, check_positive,
                             check_reader_and_memory, check_rng)


@dataclass(frozen=True)
class CrossAttentionCache(Cache):
    """The caches of the Q and K/V projections, the kernel and the output projection."""

    q: Cache
    kv: Cache
    attn: Cache
    out: Cache

    @property
    def weights(self):
        """Attention weights [B, H, N, M]: query (target) n over source position m."""
        return self.attn.weights


class CrossAttention(Module):
    """x [B, N, d] reads memory [B, M, d_memory] -> [B, N, d].

    Q = x Wq (H heads), [K | V] = memory Wkv (H_kv heads each), out = Attn(Q, K, V) Wo.
    ``mask`` broadcasts to [B, H, N, M]; usually the source padding, [B, 1, 1, M].
    ``kernel``: the attention kernel, ``DotProductAttention()`` by default (no causal rule:
    every target position may read every source position).
    Parameter names: ``q.weight`` [d, H*D], ``kv.weight`` [d_memory, 2*H_kv*D]
    (columns [K | V]), ``out.weight`` [d, d], and their ``.bias``. ``rng``: the Generator
    the weights are drawn from (None: ``np.random.default_rng(0)``).
    """

    def __init__(self, d, n_heads, n_kv_heads=None, d_memory=None, bias=False, rng=None,
                 dtype=np.float32, out_std=None, kernel=None):
        n_kv_heads, rng = check_heads(d, n_heads, n_kv_heads), check_rng(rng)
        self.kernel = DotProductAttention() if kernel is None else kernel
        d_memory = d if d_memory is None else check_positive("d_memory", d_memory)
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, d // n_heads
        self.q = Linear(d, d, bias, rng, dtype=dtype)
        self.kv = Linear(d_memory, 2 * n_kv_heads * self.head_dim, bias, rng, dtype=dtype)
        self.out = Linear(d, d, bias, rng, std=out_std, dtype=dtype)

    def forward(self, x, memory, mask=None):
        """x [B, N, d] reading memory [B, M, d_memory] -> (y [B, N, d], cache)."""
        check_reader_and_memory(x, check_float("memory", memory, self.kv.weight.dtype))
        B, N, _ = x.shape
        M = memory.shape[1]
        H, H_kv, D = self.n_heads, self.n_kv_heads, self.head_dim
        mask = check_mask(mask, (B, H, N, M))
        q_flat, q_cache = self.q.forward(x)                                # [B, N, H*D]
        kv_flat, kv_cache = self.kv.forward(memory)                        # [B, M, 2*H_kv*D]
        q = q_flat.reshape(B, N, H, D).transpose(0, 2, 1, 3)               # [B, H, N, D]
        kv = kv_flat.reshape(B, M, 2 * H_kv, D).transpose(0, 2, 1, 3)      # [B, 2 H_kv, M, D]
        k, v = kv[:, :H_kv], kv[:, H_kv:]
        mixed, attn_cache = self.kernel.forward(q, k, v, mask)             # [B, H, N, D]
        merged = mixed.transpose(0, 2, 1, 3).reshape(B, N, H * D)
        y, out_cache = self.out.forward(merged)
        return y, CrossAttentionCache(q_cache, kv_cache, attn_cache, out_cache)

    def backward(self, d_out, cache):
        """-> (d_x [B, N, d], d_memory [B, M, d_memory]) from d_out [B, N, d]."""
        d_merged = self.out.backward(d_out, cache.out)                     # undoes y = merged Wo
        B, N, _ = d_merged.shape
        H, H_kv, D = self.n_heads, self.n_kv_heads, self.head_dim
        d_mixed = d_merged.reshape(B, N, H, D).transpose(0, 2, 1, 3)       # undoes the merge of heads
        d_q, d_k, d_v = self.kernel.backward(d_mixed, cache.attn)          # undoes mixed = Attn(q, k, v)
        M = d_k.shape[2]
        # undoes k, v = the two halves of kv, split into heads
        d_kv = np.concatenate([d_k, d_v], axis=1).transpose(0, 2, 1, 3)    # [B, M, 2 H_kv, D]
        d_memory = self.kv.backward(d_kv.reshape(B, M, 2 * H_kv * D), cache.kv)   # undoes memory Wkv
        # undoes q = (x Wq) split into heads
        d_x = self.q.backward(d_q.transpose(0, 2, 1, 3).reshape(B, N, H * D), cache.q)
        return d_x, d_memory
