# exercise: softmax
# function: t03_softmax.py:softmax_forward
# slip: the mask is applied after the softmax: masked entries are zeroed but the row is not renormalised
def softmax_forward(x, axis=-1, mask=None):
    """Scores x (the article's s) -> weights y (its a): a_j = exp(s_j - max s) / sum_k
    exp(s_k - max s), only over entries where ``mask`` is True.

    ``mask`` is boolean and broadcasts against ``x``; False entries get weight exactly 0.
    A row with no True entry (fully masked) returns all zeros, never NaN.
    """
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)          # a fully masked row has no maximum
    e = np.exp(x - peak)                                 # every exponent <= 0: no overflow
    total = np.sum(e, axis=axis, keepdims=True)
    y = e / np.where(total > 0, total, 1)                # a fully masked row stays all 0
    if mask is not None:
        y = np.where(mask, y, 0)
    return y, SoftmaxCache(y, axis)
