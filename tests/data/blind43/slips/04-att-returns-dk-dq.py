# exercise: attention
# function: t04_attention.py:attention_backward
# slip: the gradients of q and k are returned in swapped order
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
    return d_k, d_q, d_v
