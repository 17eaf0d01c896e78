# exercise: alibi
# function: t21_alibi.py:alibi_backward
# slip: the slopes' gradient has the wrong sign (the bias is -m (i - j))
def alibi_backward(d_out, cache):
    """-> (d_scores, d_slopes) from d_out [B, H, N, M], the gradient of the biased scores."""
    # forward: biased = scores + bias: the gradient passes to the scores unchanged
    d_scores = d_out
    # forward: bias = -m_h (i - j): each slope collects its head's gradient times -(i - j)
    d_slopes = (d_out * cache.distance).sum(axis=(0, 2, 3))       # [H]
    return d_scores, d_slopes
