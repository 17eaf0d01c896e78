# exercise: activations
# function: t06_activations.py:gelu_backward
# slip: the product rule is half done: the x phi(x) term is missing
def gelu_backward(d_out, cache):
    """d_out times the derivative of x Phi(x)."""
    x = cache.x
    # forward: y = x Phi(x), and Phi' = phi
    return d_out * _Phi(x)
