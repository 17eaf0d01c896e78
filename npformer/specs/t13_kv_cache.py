"""The KV cache (``t13_kv_cache.py``), as the engines know it.

Decoding one position at a time through the cache as a component (it must give causal
attention over the whole sequence, GQA included), its fact (it never reads ahead), exercise 13
(the cache's writes, and the grouped-query attention it serves, from ``t04_attention.py``) and
its claims. Mistakes: ``t13_kv_cache.json``.
"""
from __future__ import annotations

import numpy as np

from . import claims
from .draw import Example, arrays, head_groups, normal, size
from .facts import close
from .registry import Spec, lookup
from .t10_model import decoder

spec = Spec("t13_kv_cache.py")


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


@spec.component("kv_decode", "decoding one position at a time through a KV cache",
                "decode_step(q_t, k_t, v_t, cache) -> (out_t, cache); cache is None at the first step",
                (decode_reference, None), "", ("t13_kv_cache.LayerKV.write", "t13_kv_cache.LayerKV.extend"),
                adapt=lambda step: lambda q, k, v: decode_all(step, q, k, v))
def decode_inputs(draw):
    """A whole sequence's q [B, H, N, D], k and v [B, H_kv, N, D] (GQA included): decoded one
    position at a time through a KV cache, it must give causal attention over all N."""
    B, N, D = draw(size(1, 2)), draw(size(1, 5)), draw(size(1, 3))
    H, H_kv = head_groups(draw, True)
    args = (draw(arrays((B, H, N, D))), draw(arrays((B, H_kv, N, D))), draw(arrays((B, H_kv, N, D))))
    return Example(("q", "k", "v"), args)


@spec.corners("kv_decode")
def decode_corners(rng):
    return [Example(("q", "k", "v"), (normal(rng, 2, 4, 5, 3), normal(rng, 2, 2, 5, 3), normal(rng, 2, 2, 5, 3)))]


@spec.prop("kv_decode", "the output at a position does not change when later keys and values do")
def decoding_never_reads_ahead(subject, example):
    q, k, v = example.args
    if q.shape[2] < 2:
        return
    out = subject.output(example.args, example.options)
    later_k, later_v = k.copy(), v.copy()
    later_k[:, :, -1] += 1.5
    later_v[:, :, -1] += 2.0
    moved = subject.output((q, later_k, later_v), example.options)
    close("the outputs before the last position", np.asarray(moved)[:, :, :-1], np.asarray(out)[:, :, :-1])


spec.capability("kv_decode", "no_gqa")(lambda args, options: args[0].shape[1] == args[1].shape[1])

spec.exercise(13, "kv-cache", "the KV cache and grouped-query attention",
              "tutorial part 2 §15, why a KV cache speeds up generation; tutorial part 1, GQA and MoE",
              backward=("t04_attention.py:grouped_attention_backward",),
              forward=("t13_kv_cache.py:LayerKV.write", "t13_kv_cache.py:LayerKV.extend",
                       "t04_attention.py:grouped_attention_forward"),
              checks=(("grouped_attention", (0, 1, 2)),), components=("grouped_attention", "kv_decode"))


@spec.claim("kv-cache", "decoding one token at a time through the KV cache gives the full forward's logits")
def cached_logits_equal_the_full_forward(L, R):
    g = claims.rng()
    model = decoder(L, g, n_layers=2, n_kv_heads=1)
    ids = g.integers(0, 13, (2, 6))
    full = model.forward(ids)[0]
    cache = model.new_kv_cache(2)
    steps = [model.forward(ids[:, t:t + 1], kv_cache=cache)[0] for t in range(6)]
    claims.close("cached logits", np.concatenate(steps, axis=1), full, 1e-10)


def write_of_another_shape(L):
    """{"raised": what LayerKV.write raised for keys of another shape than the cache's, or None}."""
    cache = L.t13_kv_cache.KVCache(1, 2, 2, 4, 3, np.float64)
    wrong = np.zeros((2, 1, 1, 3))                       # one key/value head where the cache holds two
    return {"raised": claims.raised(lambda: cache.layers[0].write(wrong, wrong))}


def judge_write_of_another_shape(computed):
    """The claim's verdict: the write raised ValueError (or a subclass of it)."""
    claims.expects("ValueError", computed.get("raised", ...),
                   "LayerKV.write stored keys of shape (2, 1, 1, 3) in a cache of 2 heads",
                   "LayerKV.write of keys of shape (2, 1, 1, 3) in a cache of 2 heads")


@spec.claim("kv-cache", "keys of another shape than the cache was made for are refused with a ValueError")
def refuses_another_shape(L, R):
    return judge_write_of_another_shape(write_of_another_shape(L))


# graded, the two halves run apart: the learner's process reports, the judge decides
refuses_another_shape.compute, refuses_another_shape.judge = write_of_another_shape, judge_write_of_another_shape


@spec.claim("kv-cache", "new keys and values are stored in the cache's own preallocated arrays (KVCache.k, "
                        "KVCache.v), after the ones already cached")
def writes_fill_the_cache(L, R):
    g = claims.rng()
    cache = L.t13_kv_cache.KVCache(1, 2, 2, 4, 3, np.float64)
    k1, v1, k2, v2 = (g.standard_normal((2, 2, n, 3)) for n in (2, 2, 1, 1))
    cache.layers[0].write(k1, v1)
    cache.advance(2)
    cache.layers[0].write(k2, v2)
    claims.close("KVCache.k[0] after writing 2 then 1 positions", cache.k[0, :, :, :3], np.concatenate([k1, k2], axis=2))
    claims.close("KVCache.v[0] after writing 2 then 1 positions", cache.v[0, :, :, :3], np.concatenate([v1, v2], axis=2))


@spec.claim("kv-cache", "with a sliding window of 2, a prompt of 3 then one token at a time through the KV "
                        "cache gives the full forward's logits")
def windowed_cached_logits(L, R):
    g = claims.rng()
    model = decoder(L, g, n_layers=2, n_kv_heads=1, window=2)
    ids = g.integers(0, 13, (2, 6))
    full = model.forward(ids)[0]
    cache = model.new_kv_cache(2)
    steps = [model.forward(ids[:, :3], kv_cache=cache)[0]]           # three new queries at once
    steps += [model.forward(ids[:, t:t + 1], kv_cache=cache)[0] for t in range(3, 6)]
    claims.close("cached logits", np.concatenate(steps, axis=1), full, 1e-10)


def backward_after_a_step(L):
    """{"raised": what the backward through a KV-cached decoding step raised, or None}."""
    g = claims.rng()
    mha = L.t04_attention.MultiHeadAttention(8, 2, rng=g, dtype=np.float64)
    cache = L.t13_kv_cache.KVCache(1, 1, 2, 4, 4, np.float64)
    out, step = mha.forward(g.standard_normal((1, 1, 8)), kv=cache.layers[0])
    return {"raised": claims.raised(lambda: mha.backward(g.standard_normal(out.shape), step))}


def judge_backward_after_a_step(computed):
    """The claim's verdict: the backward raised NotImplementedError (or a subclass of it)."""
    claims.expects("NotImplementedError", computed.get("raised", ...),
                   "backward ran through a KV-cached decoding step", "backward through a KV-cached decoding step")


# a claim of the attention exercise (MultiHeadAttention.backward refuses), about the cache
@spec.claim("attention", "backward after a KV-cached decoding step is refused: the cache is for inference")
def no_backward_after_a_step(L, R):
    return judge_backward_after_a_step(backward_after_a_step(L))


no_backward_after_a_step.compute, no_backward_after_a_step.judge = backward_after_a_step, judge_backward_after_a_step
