# exercise: norm
# function: t08_norm.py:rmsnorm_forward
# slip: the root of the sum of squares is used, not of their mean
def rmsnorm_forward(x, gamma, eps=1e-6):
    """x [..., d] -> gamma * x / sqrt(mean(x^2) + eps), the mean over d."""
    rstd = 1 / np.sqrt((x ** 2).sum(axis=-1, keepdims=True) + eps)   # [..., 1]
    xhat = x * rstd                                                     # unit root mean square
    return gamma * xhat, NormCache(xhat, rstd, gamma)
