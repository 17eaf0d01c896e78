# exercise: kv-cache
# function: t04_attention.py:grouped_attention_backward
# slip: a shared head averages its group's gradients instead of summing them
def grouped_attention_backward(d_out, cache):
    """-> (d_q, d_k, d_v); a shared key/value head receives the sum of its group's gradients."""
    group = cache.q.shape[1] // cache.k.shape[1]
    # forward: out = attention(q, repeat_kv(k), repeat_kv(v))
    repeated = replace(cache, k=repeat_kv(cache.k, group), v=repeat_kv(cache.v, group))
    d_q, d_k_heads, d_v_heads = attention_backward(d_out, repeated)
    # forward: k_heads, v_heads = repeat_kv(k), repeat_kv(v)
    return d_q, sum_groups(d_k_heads, group) / group, sum_groups(d_v_heads, group) / group
