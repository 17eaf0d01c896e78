# exercise: loss
# function: t11_loss.py:cross_entropy_forward
# slip: the mean runs over every target, ignored ones included
def cross_entropy_forward(logits, targets, ignore_index=IGNORE_INDEX):
    """logits [..., V], targets [...] integer ids (or ``ignore_index``) -> (scalar loss, cache).

    If every target is ignored the loss is 0.0 (positive zero) and the gradient is all zeros.
    """
    targets, counted = check_targets(logits, targets, ignore_index)
    safe = np.where(counted, targets, 0)                                  # any id where ignored
    log_probs, log_softmax = log_softmax_forward(logits)                  # [..., V]
    picked = np.take_along_axis(log_probs, safe[..., None], axis=-1)[..., 0]   # log p(target)
    count = int(counted.sum())
    loss = -np.sum(picked * counted) / counted.size
    if count == 0:
        loss = 0.0      # no counted target: +0.0 (the line above gives -0.0), gradient all zero
    return logits.dtype.type(loss), CrossEntropyCache(log_softmax.probs, safe, counted, count)
