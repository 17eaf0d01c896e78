# exercise: alibi
# function: t21_alibi.py:alibi_backward
# correct: the slope gradient as one einsum against the distance table
def alibi_backward(d_out, cache):
    d_slopes = -np.einsum("bhnm,nm->h", d_out, cache.distance)
    return d_out, d_slopes
