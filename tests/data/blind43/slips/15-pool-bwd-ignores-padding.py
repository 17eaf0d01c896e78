# exercise: encoder
# function: t15_encoder.py:mean_pool_backward
# slip: every position gets d_pooled / N: padding gets gradient and real tokens are divided by N, not their count
def mean_pool_backward(d_pooled, cache):
    """d_states [B, N, d] from d_pooled [B, d]."""
    # each real position receives d_pooled / count; padding receives 0
    N = cache.weights.shape[1]
    return np.broadcast_to(d_pooled[:, None, :] / N, (d_pooled.shape[0], N, d_pooled.shape[1])).copy()            # [B, N, d]
