"""GQA: 32 query heads over 8 key/value heads, four query heads per KV head, a quarter of the KV cache.

Grouped-query attention keeps every query head but lets a group of them share
one key/value head. With 32 query heads and 8 KV heads each group has four
query heads; the KV cache stores 8 heads instead of 32, so (all else equal)
that part of the memory drops to a quarter. MQA is the extreme of 1 KV head.
As the tutorial says, the four query heads of a group still get different
weights: they score the same keys with different queries (given one query
projection, their tables coincide). Every number here is measured on
npformer's attention and KVCache.
"""
import numpy as np

from npformer import (DecoderConfig, DecoderLM, MultiHeadAttention, causal_mask,
                      grouped_attention_forward)


def group_weights(attn, x, H, H_kv, D, N, out):
    """The four query heads of a group share keys, yet their weight tables differ, because their
    queries do; give them one query projection and the tables become one."""
    weights = attn.forward(x, mask=causal_mask(N))[1].weights[0]          # [H, N, N]
    G = H // H_kv
    smallest = min(float(np.abs(weights[g * G + i] - weights[g * G + j]).max())
                   for g in range(H_kv) for i in range(G) for j in range(i + 1, G))
    out(f"   yet within every group the four weight tables differ (pairs differ by at least "
        f"{smallest:.3f} somewhere): each query head still has its own queries")
    qkv = attn.qkv.weight.data                                   # columns [Q heads | K heads | V heads]
    for h in range(H):                                           # give each head its group's first query
        first = (h // G) * G
        qkv[:, h * D:(h + 1) * D] = qkv[:, first * D:(first + 1) * D]
    shared = attn.forward(x, mask=causal_mask(N))[1].weights[0]
    largest = max(float(np.abs(shared[g * G + i] - shared[g * G]).max())
                  for g in range(H_kv) for i in range(1, G))
    out(f"   with one query projection per group the four tables coincide (largest difference "
        f"{largest:.1e}): shared keys alone do not make the weights equal")
    return {"group_weights": weights, "smallest_group_gap": smallest,
            "shared_query_weights": shared, "shared_query_gap": largest}


def run(out=print):
    H, H_kv, D, N = 32, 8, 2, 6
    d = H * D                                                     # width 64
    rng = np.random.default_rng(0)
    attn = MultiHeadAttention(d, n_heads=H, n_kv_heads=H_kv, rng=rng, dtype=np.float64)
    x = rng.standard_normal((1, N, d))
    y, cache = attn.forward(x, mask=causal_mask(N))
    out(f"1. width {d}, {H} query heads of width {D}, {H_kv} key/value heads")
    out(f"   Q {list(cache.attn.q.shape)}, K {list(cache.attn.k.shape)}, V {list(cache.attn.v.shape)}, "
        f"weights {list(cache.weights.shape)}: every query head keeps its own table")

    out("2. Which query heads read each KV head? Disturb one KV head's keys, see whose output moves.")
    before, _ = grouped_attention_forward(cache.attn.q, cache.attn.k, cache.attn.v, causal_mask(N))
    readers = []
    for g in range(H_kv):
        k_changed = cache.attn.k.copy()
        k_changed[:, g] += rng.standard_normal(k_changed[:, g].shape)   # disturb KV head g only
        after, _ = grouped_attention_forward(cache.attn.q, k_changed, cache.attn.v, causal_mask(N))
        moved = np.nonzero(np.abs(after - before).max(axis=(0, 2, 3)) > 1e-6)[0]   # [H] -> changed heads
        readers.append(moved.tolist())
        out(f"   KV head {g}: read by query heads {readers[-1]}")
    out(f"   {len(readers[0])} query heads per KV head; query head h reads KV head h // 4")
    same_group = group_weights(attn, x, H, H_kv, D, N, out)
    out("3. The same shapes in a whole model: KV cache bytes from KVCache.nbytes")
    sizes = {}
    for label, kv_heads in (("MHA, 32 KV heads", 32), ("GQA, 8 KV heads", 8), ("MQA, 1 KV head", 1)):
        config = DecoderConfig(vocab_size=50, d_model=d, n_heads=H, n_kv_heads=kv_heads, max_len=128)
        cache_kv = DecoderLM(config, np.random.default_rng(0)).new_kv_cache(batch=1, capacity=128)
        sizes[kv_heads] = cache_kv.nbytes
        out(f"   {label:17}: k and v {list(cache_kv.k.shape)} each -> {cache_kv.nbytes:,} bytes")
    out(f"   GQA / MHA = {sizes[8] / sizes[32]:.2f}; MQA / MHA = {sizes[1] / sizes[32]:.5f} (1/32)")
    return {"q_heads": cache.attn.q.shape[1], "kv_heads": cache.attn.k.shape[1],
            "readers": readers, "cache_bytes": sizes, **same_group,
            "gqa_ratio": sizes[8] / sizes[32], "mqa_ratio": sizes[1] / sizes[32]}


if __name__ == "__main__":
    run()
