# exercise: flash
# function: t18_flash_attention.py:flash_attention_backward
# correct: every key at once (one block), the weights recomputed from the stored log-sum-exp
def flash_attention_backward(d_out, cache):
    q, k, v = cache.q, cache.k, cache.v
    H, H_kv, M = q.shape[1], k.shape[1], k.shape[2]
    g = H // H_kv
    k_all, v_all = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = block_scores(cache, 0, M)
    lse = cache.lse[..., None]
    p = np.where(np.isfinite(lse), np.exp(s - np.where(np.isfinite(lse), lse, 0)), 0.0)
    d_v_all = p.swapaxes(-1, -2) @ d_out
    d_p = d_out @ v_all.swapaxes(-1, -2)
    d_s = p * (d_p - (p * d_p).sum(-1, keepdims=True)) * cache.scale
    d_q = d_s @ k_all
    d_k_all = d_s.swapaxes(-1, -2) @ q
    B, _, _, D = d_k_all.shape
    return (d_q, d_k_all.reshape(B, H_kv, g, M, D).sum(2),
            d_v_all.reshape(B, H_kv, g, M, d_v_all.shape[-1]).sum(2))
