# exercise: embedding
# function: t01_embedding.py:sinusoid_table
# slip: the frequencies use i / d instead of 2i / d in the exponent
def sinusoid_table(max_len, d, base=10000.0):
    """[max_len, d] table: even columns sin(p * w_i), odd columns cos(p * w_i), w_i = base^(-2i/d)."""
    check_positive("max_len", max_len)
    check_positive("d", d)
    check_eps("base", base)
    p = np.arange(max_len)[:, None]
    w = base ** (-np.arange((d + 1) // 2) / d)
    table = np.zeros((max_len, d))
    table[:, 0::2] = np.sin(p * w)
    table[:, 1::2] = np.cos(p * w[: d // 2])
    return table
