# exercise: encoder
# function: t15_encoder.py:l2_normalize_backward
# correct: the Jacobian of x / |x| applied as d_out / |x| - x (x . d_out) / |x|^3, x recovered from y
def l2_normalize_backward(d_out, cache):
    x = cache.y * cache.length
    n = cache.length
    full = d_out / n - x * np.sum(x * d_out, axis=-1, keepdims=True) / n ** 3
    return np.where(cache.clamped, d_out / n, full)
