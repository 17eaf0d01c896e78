# exercise: attention
# function: t04_attention.py:attention_backward
# correct: einsum for every product, the softmax backward written inline
def attention_backward(d_out, cache):
    q, k, v, scale = cache.q, cache.k, cache.v, cache.scale
    p = cache.softmax.y
    d_v = np.einsum("bhnm,bhne->bhme", p, d_out)
    d_p = np.einsum("bhne,bhme->bhnm", d_out, v)
    d_s = p * (d_p - (p * d_p).sum(-1, keepdims=True))
    d_q = scale * np.einsum("bhnm,bhmd->bhnd", d_s, k)
    d_k = scale * np.einsum("bhnm,bhnd->bhmd", d_s, q)
    return d_q, d_k, d_v
