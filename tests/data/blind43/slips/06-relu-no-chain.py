# exercise: activations
# function: t06_activations.py:relu_backward
# slip: the chain rule is forgotten: the derivative is returned without multiplying by d_out
def relu_backward(d_out, cache):
    """Passes d_out where x > 0, zero elsewhere."""
    return (cache.x > 0).astype(d_out.dtype)
