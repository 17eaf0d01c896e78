# exercise: loss
# function: t11_loss.py:cross_entropy_backward
# slip: the gradient has the wrong sign: one_hot - p
def cross_entropy_backward(d_loss, cache):
    """(d_logits, None): the targets are integers and get no gradient."""
    # forward: loss = -(1/count) sum over counted positions of log softmax(logits)[target]
    one_hot = np.zeros_like(cache.probs)
    np.put_along_axis(one_hot, cache.targets[..., None], 1, axis=-1)
    weight = cache.counted * (d_loss / max(cache.count, 1))               # [...], 0 where ignored
    d_logits = (one_hot - cache.probs) * weight[..., None].astype(cache.probs.dtype)
    return d_logits, None
