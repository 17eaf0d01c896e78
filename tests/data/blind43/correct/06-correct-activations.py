# exercise: activations
# function: t06_activations.py:gelu_backward
# correct: Phi and phi recomputed from erf and exp
def gelu_backward(d_out, cache):
    from scipy.special import erf
    x = cache.x
    cdf = 0.5 * (1.0 + erf(x / np.sqrt(2.0)))
    pdf = np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)
    return d_out * (cdf + x * pdf)
