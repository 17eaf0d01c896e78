# exercise: flash
# function: t18_flash_attention.py:flash_attention_forward
# slip: the stored log-sum-exp leaves out the running maximum
def flash_attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None, block_size=128):
    """q [B, H, N, D], k [B, H_kv, M, D], v [B, H_kv, M, Dv] -> out [B, H, N, Dv], equal to
    ``attention_forward`` with the same masking, computed ``block_size`` keys at a time.

    ``causal``: query i (the last N of M positions) reads keys j <= its position; ``window``:
    also at most the ``window`` most recent keys; ``mask``: any further boolean mask. A row
    with no readable key gets a zero output. ``scale`` defaults to 1/sqrt(D).
    """
    settings = flash_settings(q, k, v, mask, scale, causal, window, block_size)
    B, H, N, _ = q.shape
    M, Dv = k.shape[2], v.shape[3]
    v_heads = repeat_kv(v, H // k.shape[1])                               # [B, H, M, Dv]
    running_max = np.full((B, H, N, 1), -np.inf, q.dtype)                # m
    total = np.zeros((B, H, N, 1), q.dtype)                               # l
    acc = np.zeros((B, H, N, Dv), q.dtype)                                # sum of p v so far
    for start in range(0, M, settings.block_size):
        stop = min(M, start + settings.block_size)
        scores = block_scores(settings, start, stop)                      # [B, H, N, bk]
        new_max = np.maximum(running_max, scores.max(axis=-1, keepdims=True))
        safe_max = np.where(np.isfinite(new_max), new_max, 0)             # nothing readable yet
        p = np.exp(scores - safe_max)                                     # this block's weights
        rescale = np.exp(running_max - safe_max)                          # exp(m - m_new)
        total = total * rescale + p.sum(axis=-1, keepdims=True)
        acc = acc * rescale + p @ v_heads[:, :, start:stop]
        running_max = new_max
    readable = total > 0
    out = acc / np.where(readable, total, 1)
    lse = np.where(readable, np.log(np.where(readable, total, 1)), -np.inf)
    return out, FlashAttentionCache(q, k, v, out, lse[..., 0], settings.mask, settings.scale,
                                    settings.causal, settings.window, settings.block_size)
