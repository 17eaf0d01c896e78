# exercise: alibi
# function: t21_alibi.py:alibi_slopes
# slip: the slopes start at h = 0 (a first slope of 1), not h = 1
def alibi_slopes(n_heads):
    """[H] slopes m_h: 2^(-8 h / H) for h = 1 .. H when H is a power of 2; else those of the
    power of 2 below H, then every other slope of twice as many heads."""
    below = 2 ** int(math.floor(math.log2(check_positive("n_heads", n_heads))))
    slopes = 2.0 ** (-8.0 * np.arange(below) / below)
    if below == n_heads:
        return slopes
    twice = 2.0 ** (-8.0 * np.arange(1, 2 * below + 1) / (2 * below))
    return np.concatenate([slopes, twice[0::2][:n_heads - below]])
