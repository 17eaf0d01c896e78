# exercise: kv-cache
# function: t04_attention.py:grouped_attention_forward
# slip: the key/value heads are tiled (h % H_kv) instead of repeated (h // group)
def grouped_attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None):
    """q [B, H, N, D], k [B, H_kv, M, D], v [B, H_kv, M, Dv] -> out [B, H, N, Dv]: attention
    with each key/value head shared by H / H_kv query heads (H_kv = H is plain attention)."""
    group = check_grouped_qkv(q, k, v)                             # H / H_kv
    out, cache = attention_forward(q, np.tile(k, (1, group, 1, 1)), np.tile(v, (1, group, 1, 1)), mask, scale,
                                   causal, window)
    return out, replace(cache, k=k, v=v)                           # the shared heads, not copies
