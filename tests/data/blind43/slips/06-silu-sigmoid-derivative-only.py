# exercise: activations
# function: t06_activations.py:silu_backward
# slip: the derivative of the sigmoid is used for SiLU: the product rule with x is missing
def silu_backward(d_out, cache):
    """d_out times the derivative of x sigmoid(x)."""
    x, s = cache.x, cache.s
    # forward: y = x s, and s' = s (1 - s), so dy/dx = s + x s (1 - s)
    return d_out * s * (1 - s)
