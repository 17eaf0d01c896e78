# exercise: activations
# function: t06_activations.py:gelu_backward
# slip: the second term of the product rule lacks its factor x
def gelu_backward(d_out, cache):
    """d_out times the derivative of x Phi(x)."""
    x = cache.x
    # forward: y = x Phi(x), and Phi' = phi
    return d_out * (_Phi(x) + _phi(x))
