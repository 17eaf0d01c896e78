# exercise: encoder
# function: t15_encoder.py:l2_normalize_backward
# slip: the length's dependence on x is ignored: d_out / |x| without removing the radial part
def l2_normalize_backward(d_out, cache):
    """d_x from d_out for y = x / |x|."""
    # forward: y = x / |x|; d_x = (d_out - y (y . d_out)) / |x|: only the part of d_out
    # across the sphere survives (where |x| < eps, y = x / eps is a plain scaling)
    y, length = cache.y, cache.length
    across = d_out
    return np.where(cache.clamped, d_out, across) / length
