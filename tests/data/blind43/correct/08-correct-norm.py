# exercise: norm
# function: t08_norm.py:layernorm_backward
# correct: the CS231n way, through d_var and d_mean, with x - mean recovered from the cache
def layernorm_backward(d_out, cache):
    xhat, rstd, gamma = cache.xhat, cache.rstd, cache.gamma
    d = xhat.shape[-1]
    axes = tuple(range(xhat.ndim - 1))
    d_gamma = (d_out * xhat).sum(axis=axes)
    d_beta = d_out.sum(axis=axes)
    centred = xhat / rstd                                   # x - mean
    d_xhat = d_out * gamma
    d_var = (d_xhat * centred).sum(-1, keepdims=True) * -0.5 * rstd ** 3
    d_mean = -(d_xhat * rstd).sum(-1, keepdims=True) - 2.0 * d_var * centred.mean(-1, keepdims=True)
    d_x = d_xhat * rstd + d_var * 2.0 * centred / d + d_mean / d
    return d_x, d_gamma, d_beta
