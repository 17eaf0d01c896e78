# exercise: linear
# function: t02_linear.py:linear_backward
# correct: einsum for every product (the positions flattened to rows where they are summed)
def linear_backward(d_out, cache):
    x, weight = cache.x, cache.weight
    rows_x, rows_d = x.reshape(-1, x.shape[-1]), d_out.reshape(-1, d_out.shape[-1])
    d_x = np.einsum("...o,io->...i", d_out, weight)
    d_weight = np.einsum("ni,no->io", rows_x, rows_d)
    d_bias = np.einsum("no->o", rows_d) if cache.has_bias else None
    return d_x, d_weight, d_bias
