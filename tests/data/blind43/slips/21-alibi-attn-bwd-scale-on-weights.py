# exercise: alibi
# function: t21_alibi.py:ALiBiAttention.backward
# slip: the scale is applied to the weights' gradient as well as to the scores'
def backward(self, d_out, cache):
    """-> (d_q, d_k, d_v); a shared key/value head receives its group's sum."""
    # forward: out = weights @ values
    d_weights = d_out @ cache.v.swapaxes(-1, -2) * cache.scale                     # [B, H, N, M]
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
