# exercise: linear
# function: t02_linear.py:linear_backward
# correct: einsum over every leading axis instead of flattening to rows
def linear_backward(d_out, cache):
    x, weight = cache.x, cache.weight
    d_x = np.einsum("...o,io->...i", d_out, weight)
    d_weight = np.einsum("...i,...o->io", x, d_out)
    d_bias = np.einsum("...o->o", d_out) if cache.has_bias else None
    return d_x, d_weight, d_bias
