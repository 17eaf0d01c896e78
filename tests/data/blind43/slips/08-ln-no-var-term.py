# exercise: norm
# function: t08_norm.py:layernorm_backward
# slip: the path through the variance is missing: the xhat * mean(d_xhat xhat) term is dropped
def layernorm_backward(d_out, cache):
    """-> (d_x, d_gamma, d_beta)."""
    xhat, rstd = cache.xhat, cache.rstd
    # forward: y = gamma * xhat + beta
    d_gamma = sum_over_positions(d_out * xhat)
    d_beta = sum_over_positions(d_out)
    d_xhat = d_out * cache.gamma
    # forward: xhat = (x - mean) * rstd; x reaches xhat directly, through the mean and
    # through the variance, and the three terms below are those three paths
    d_x = rstd * (d_xhat - d_xhat.mean(axis=-1, keepdims=True))
    return d_x, d_gamma, d_beta
