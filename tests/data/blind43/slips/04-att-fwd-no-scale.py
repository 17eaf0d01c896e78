# exercise: attention
# function: t04_attention.py:attention_forward
# slip: the scores are never multiplied by the scale (1/sqrt(D) forgotten)
def attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None):
    """q [B, H, N, D], k [B, H, M, D], v [B, H, M, Dv] -> out [B, H, N, Dv]: softmax(q k^T / sqrt(D)) v.

    ``mask`` ("may read", boolean) broadcasts to [B, H, N, M]. ``causal`` (and ``window``)
    add the causal rule for queries that are the last N of M positions. ``scale`` defaults
    to 1/sqrt(D). The weights are in ``cache.weights``.
    """
    B, H, N, D, M = check_qkv(q, k, v)
    mask = combine_masks(check_mask(mask, (B, H, N, M)), causal, check_window(window), N, M)
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    scores = q @ k.swapaxes(-1, -2)                        # [B, H, N, M]
    weights, softmax = softmax_forward(scores, mask=mask)          # [B, H, N, M]
    out = weights @ v                                              # [B, H, N, Dv]
    return out, AttentionCache(q, k, v, softmax, scale)
