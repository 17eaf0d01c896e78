# exercise: norm
# function: t08_norm.py:layernorm_forward
# slip: the mean and variance are taken over the batch (axis 0), not over the features
def layernorm_forward(x, gamma, beta, eps=1e-5):
    """x [..., d] -> gamma * (x - mean) / sqrt(var + eps) + beta, mean and var over d."""
    mean = x.mean(axis=0, keepdims=True)                       # [..., 1]
    var = ((x - mean) ** 2).mean(axis=0, keepdims=True)        # [..., 1]
    rstd = 1 / np.sqrt(var + eps)
    xhat = (x - mean) * rstd                                    # zero mean, unit variance
    return gamma * xhat + beta, NormCache(xhat, rstd, gamma)
