# exercise: softmax
# function: t03_softmax.py:softmax_backward
# slip: the sum term is missing: each weight depends on every score of its row
def softmax_backward(d_out, cache):
    """d_x, the gradient of the scores, from d_out, the gradient of the weights y."""
    y = cache.y
    # forward: y = e / sum(e). Each y_i depends on every x_j: d_x_i = y_i (d_y_i - sum_j d_y_j y_j).
    # A masked entry has y = 0, so its gradient is 0 too.
    return y * d_out
