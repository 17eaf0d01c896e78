# exercise: kv-cache
# function: t04_attention.py:grouped_attention_backward
# correct: the query heads reshaped into their groups [B, H_kv, group, ...], einsum over the group axis
def grouped_attention_backward(d_out, cache):
    q, k, v, scale = cache.q, cache.k, cache.v, cache.scale
    B, H, N, D = q.shape
    H_kv, M = k.shape[1], k.shape[2]
    g = H // H_kv
    p = cache.softmax.y.reshape(B, H_kv, g, N, M)
    dO = d_out.reshape(B, H_kv, g, N, -1)
    qg = q.reshape(B, H_kv, g, N, D)
    d_v = np.einsum("bkgnm,bkgne->bkme", p, dO)
    d_p = np.einsum("bkgne,bkme->bkgnm", dO, v)
    d_s = p * (d_p - (p * d_p).sum(-1, keepdims=True))
    d_q = scale * np.einsum("bkgnm,bkmd->bkgnd", d_s, k).reshape(B, H, N, D)
    d_k = scale * np.einsum("bkgnm,bkgnd->bkmd", d_s, qg)
    return d_q, d_k, d_v
