# exercise: encoder
# function: t15_encoder.py:mean_pool_backward
# slip: the division by the number of real tokens is forgotten in the backward
def mean_pool_backward(d_pooled, cache):
    """d_states [B, N, d] from d_pooled [B, d]."""
    # each real position receives d_pooled / count; padding receives 0
    return (cache.weights > 0)[:, :, None] * d_pooled[:, None, :]            # [B, N, d]
