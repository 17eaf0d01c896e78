# exercise: loss
# function: t11_loss.py:log_softmax_backward
# slip: the sum of d_out is dropped: valid only when the upstream gradients sum to 1
def log_softmax_backward(d_out, cache):
    """Gradient of the input from the gradient of the log-probabilities."""
    # forward: y_i = x_i - log sum_j e^x_j, so dx_i = dy_i - p_i sum_j dy_j
    return d_out - cache.probs
