# exercise: softmax
# function: t03_softmax.py:softmax_backward
# correct: the softmax axis moved last, the Jacobian-vector product as y*g - y (y.g), moved back
def softmax_backward(d_out, cache):
    y = np.moveaxis(cache.y, cache.axis, -1)
    g = np.moveaxis(d_out, cache.axis, -1)
    dot = (y * g).sum(-1)[..., None]
    return np.moveaxis(y * g - y * dot, -1, cache.axis)
