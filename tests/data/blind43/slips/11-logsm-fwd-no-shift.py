# exercise: loss
# function: t11_loss.py:log_softmax_forward
# slip: the maximum is not subtracted: exp overflows for large logits
def log_softmax_forward(x, axis=-1):
    """log softmax(x) = x - max - log sum exp(x - max), stable for huge scores."""
    shifted = x
    log_total = np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    y = shifted - log_total
    return y, LogSoftmaxCache(np.exp(y), axis)
