# exercise: flash
# function: t18_flash_attention.py:flash_attention_backward
# slip: d_q keeps only the last block of keys' contribution instead of summing over blocks
def flash_attention_backward(d_out, cache):
    """-> (d_q, d_k, d_v), recomputing each block's weights from the stored log-sum-exp."""
    q, k, v = cache.q, cache.k, cache.v
    group, M = q.shape[1] // k.shape[1], k.shape[2]
    k_heads, v_heads = repeat_kv(k, group), repeat_kv(v, group)           # [B, H, M, D]
    lse = cache.lse[..., None]
    lse = np.where(np.isfinite(lse), lse, np.inf)                         # unreadable row: p = 0
    delta = np.sum(d_out * cache.out, axis=-1, keepdims=True)             # [B, H, N, 1]
    d_q = np.zeros_like(q)
    d_k_heads, d_v_heads = np.zeros_like(k_heads), np.zeros_like(v_heads)
    for start in range(0, M, cache.block_size):
        keys = slice(start, min(M, start + cache.block_size))
        # forward: p = exp(s - lse), the block's normalised weights
        p = np.exp(block_scores(cache, keys.start, keys.stop) - lse)      # [B, H, N, bk]
        # forward: out = sum over blocks of p @ v
        d_v_heads[:, :, keys] += p.swapaxes(-1, -2) @ d_out
        d_p = d_out @ v_heads[:, :, keys].swapaxes(-1, -2)
        # forward: p = softmax(s) over the whole row; s = q k^T * scale
        d_scores = p * (d_p - delta) * cache.scale
        d_q = d_scores @ k_heads[:, :, keys]
        d_k_heads[:, :, keys] += d_scores.swapaxes(-1, -2) @ q
    return d_q, sum_groups(d_k_heads, group), sum_groups(d_v_heads, group)
