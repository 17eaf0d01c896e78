"""npformer's own implementation of each component, in the component's documented signature.

Most components are npformer's plain function pairs as they stand (``softmax_forward`` and
``softmax_backward``...). A few are layers (an embedding table, multi-head attention, SwiGLU,
RoPE): here they take their weights as arguments, build the npformer module, and return its
gradients, so a user's function of the same signature can be compared with them. Every
function looks npformer's code up when it is called, so a patched-in function (a learner's,
a catalogued mistake) is the one that runs.
"""
from __future__ import annotations

import importlib

import numpy as np

ROOT = __name__.split(".")[0]


def lookup(path):
    """npformer's object at ``path`` ("t04_attention.attention_forward"), as it is now."""
    module_name, _, name = path.rpartition(".")
    return getattr(importlib.import_module(f"{ROOT}.{module_name}"), name)


def pair(forward, backward=None):
    """A reference (forward, backward) pair that looks both functions up at each call."""
    def forward_now(*args, **options):
        return lookup(forward)(*args, **options)

    def backward_now(d_out, cache):
        return lookup(backward)(d_out, cache)
    forward_now.__name__ = forward.rpartition(".")[2]
    forward_now.__wrapped__ = lookup(forward)       # inspect.signature sees the real parameters
    if backward is None:
        return forward_now, None
    backward_now.__name__ = backward.rpartition(".")[2]
    return forward_now, backward_now


def _rng():
    return np.random.default_rng(0)


# -- layers with their weights as arguments ---------------------------------------------------
def embedding_forward(ids, table):
    """ids [B, N], table [V, d] -> (table rows [B, N, d], cache)."""
    layer = lookup("t01_embedding.Embedding")(table.shape[0], table.shape[1], _rng(), dtype=table.dtype)
    layer.weight.data[...] = table
    out, cache = layer.forward(ids)
    return out, (layer, cache)


def embedding_backward(d_out, cache):
    """-> (None, d_table): ids get no gradient; a row read twice receives both."""
    layer, inner = cache
    layer.backward(d_out, inner)
    return None, layer.weight.grad


def multi_head_forward(x, w_q, w_k, w_v, w_o, n_heads, mask=None, causal=False):
    """x [B, N, d] -> (out [B, N, d], cache): H = n_heads query heads of width D = d / H,
    H_kv = (columns of w_k) / D key/value heads, Wo = w_o; no biases."""
    d = x.shape[-1]
    D = w_q.shape[1] // n_heads
    layer = lookup("t04_attention.MultiHeadAttention")(d, n_heads, w_k.shape[1] // D, rng=_rng(),
                                                        dtype=x.dtype, causal=causal)
    layer.qkv.weight.data[...] = np.concatenate([w_q, w_k, w_v], axis=1)
    layer.out.weight.data[...] = w_o
    out, cache = layer.forward(x, mask)
    return out, (layer, cache)


def multi_head_backward(d_out, cache):
    """-> (d_x, d_w_q, d_w_k, d_w_v, d_w_o, None)."""
    layer, inner = cache
    d_x = layer.backward(d_out, inner)
    H_D, kv = layer.n_heads * layer.head_dim, layer.n_kv_heads * layer.head_dim
    d_qkv = layer.qkv.weight.grad
    return d_x, d_qkv[:, :H_D], d_qkv[:, H_D:H_D + kv], d_qkv[:, H_D + kv:], layer.out.weight.grad, None


def swiglu_forward(x, w_gate, w_up, w_down):
    """x [..., d] -> ((SiLU(x w_gate) * (x w_up)) w_down, cache); no biases."""
    d, hidden = w_gate.shape
    layer = lookup("t07_ffn.SwiGLU")(d, hidden, bias=False, rng=_rng(), dtype=x.dtype)
    layer.gate.weight.data[...], layer.up.weight.data[...], layer.down.weight.data[...] = w_gate, w_up, w_down
    out, cache = layer.forward(x)
    return out, (layer, cache)


def swiglu_backward(d_out, cache):
    """-> (d_x, d_w_gate, d_w_up, d_w_down)."""
    layer, inner = cache
    d_x = layer.backward(d_out, inner)
    return d_x, layer.gate.weight.grad, layer.up.weight.grad, layer.down.weight.grad


def rope_forward(x, positions, base=10000.0, layout="half"):
    """x [B, H, N, D] with each pair of features turned by position * base^(-2i/D) -> (out, cache)."""
    layer = lookup("t05_rope.Rotary")(x.shape[-1], base, layout)
    out, cache = layer.forward(x, positions)
    return out, (layer, cache)


def rope_backward(d_out, cache):
    """-> (d_x, None): d_out turned back by the same angles."""
    layer, inner = cache
    return layer.backward(d_out, inner), None


# -- decoding with a KV cache ------------------------------------------------------------------
def decode_step(q_t, k_t, v_t, cache):
    """One decoding step through npformer's KV cache: the new position's q [B, H, 1, D] reads
    every key so far; ``cache`` is None at the first step -> (out_t [B, H, 1, D], cache)."""
    if cache is None:
        B, H_kv, _, D = k_t.shape
        cache = lookup("t13_kv_cache.KVCache")(1, B, H_kv, 64, D, k_t.dtype)
    k, v, _ = cache.layers[0].extend(k_t, v_t)
    cache.advance(1)
    out, _ = lookup("t04_attention.grouped_attention_forward")(q_t, k, v, causal=True)
    return out, cache


def decode_all(step, q, k, v):
    """q [B, H, N, D], k and v [B, H_kv, N, D] decoded one position at a time with ``step``
    -> out [B, H, N, D]."""
    cache, outs = None, []
    for t in range(q.shape[2]):
        out_t, cache = step(q[:, :, t:t + 1], k[:, :, t:t + 1], v[:, :, t:t + 1], cache)
        outs.append(np.asarray(out_t))
    return np.concatenate(outs, axis=2)


def decode_reference(q, k, v):
    """npformer's decoding, position by position through its KV cache."""
    return decode_all(decode_step, q, k, v)
