# exercise: kv-cache
# function: t04_attention.py:grouped_attention_backward
# slip: the query heads are grouped the wrong way round: head h is summed into h % H_kv, not h // group
def grouped_attention_backward(d_out, cache):
    """-> (d_q, d_k, d_v); a shared key/value head receives the sum of its group's gradients."""
    group = cache.q.shape[1] // cache.k.shape[1]
    # forward: out = attention(q, repeat_kv(k), repeat_kv(v))
    repeated = replace(cache, k=repeat_kv(cache.k, group), v=repeat_kv(cache.v, group))
    d_q, d_k_heads, d_v_heads = attention_backward(d_out, repeated)
    # forward: k_heads, v_heads = repeat_kv(k), repeat_kv(v)
    B, H, M = d_k_heads.shape[:3]
    H_kv = H // group
    return (d_q, d_k_heads.reshape(B, group, H_kv, M, -1).sum(axis=1),
            d_v_heads.reshape(B, group, H_kv, M, -1).sum(axis=1))
