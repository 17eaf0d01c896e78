# exercise: alibi
# function: t21_alibi.py:alibi_forward
# slip: the bias is added with the wrong sign: far keys are favoured
def alibi_forward(scores, slopes):
    """scores [B, H, N, M], slopes [H] -> (scores - m_h (i - j), cache)."""
    N, M = scores.shape[-2:]
    distance = distances(N, M).astype(scores.dtype)                # [N, M]
    bias = slopes[:, None, None] * distance
    return scores + bias, AlibiCache(distance)
