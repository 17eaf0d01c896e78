# exercise: activations
# function: t06_activations.py:gelu_tanh_backward
# slip: the derivative of a x^3 is written a x^2, the factor 3 forgotten
def gelu_tanh_backward(d_out, cache):
    """d_out times the derivative of the tanh approximation."""
    x, t = cache.x, cache.t
    # forward: u = c (x + a x^3), so du/dx = c (1 + 3 a x^2)
    du = GELU_C * (1 + GELU_A * x ** 2)
    # forward: y = 0.5 x (1 + t), t = tanh(u), and tanh' = 1 - tanh^2
    slope = 0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * du
    return d_out * slope
