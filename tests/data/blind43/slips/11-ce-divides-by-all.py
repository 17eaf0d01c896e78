# exercise: loss
# function: t11_loss.py:cross_entropy_backward
# slip: the gradient divides by every target, ignored ones included, not by the counted ones
def cross_entropy_backward(d_loss, cache):
    """(d_logits, None): the targets are integers and get no gradient."""
    # forward: loss = -(1/count) sum over counted positions of log softmax(logits)[target]
    one_hot = np.zeros_like(cache.probs)
    np.put_along_axis(one_hot, cache.targets[..., None], 1, axis=-1)
    weight = cache.counted * (d_loss / cache.counted.size)               # [...], 0 where ignored
    d_logits = (cache.probs - one_hot) * weight[..., None].astype(cache.probs.dtype)
    return d_logits, None
