# exercise: loss
# function: t11_loss.py:cross_entropy_backward
# correct: the one-hot from an identity matrix, ignored positions zeroed by a boolean index
def cross_entropy_backward(d_loss, cache):
    V = cache.probs.shape[-1]
    one_hot = np.eye(V, dtype=cache.probs.dtype)[cache.targets]
    d_logits = cache.probs - one_hot
    d_logits[~cache.counted] = 0
    if cache.count > 0:
        d_logits = d_logits * (d_loss / cache.count)
    return d_logits.astype(cache.probs.dtype), None
