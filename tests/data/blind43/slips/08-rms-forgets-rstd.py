# exercise: norm
# function: t08_norm.py:rmsnorm_backward
# slip: the factor 1/rms in front of the input gradient is forgotten
def rmsnorm_backward(d_out, cache):
    """-> (d_x, d_gamma)."""
    xhat, rstd = cache.xhat, cache.rstd
    # forward: y = gamma * xhat
    d_gamma = sum_over_positions(d_out * xhat)
    d_xhat = d_out * cache.gamma
    # forward: xhat = x * rstd, rstd = 1 / sqrt(mean(x^2) + eps); x reaches xhat directly
    # and through rstd, the two terms below
    d_x = d_xhat - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True)
    return d_x, d_gamma
