# exercise: encoder
# function: t15_encoder.py:mean_pool_forward
# slip: the mean divides by N, padding included, instead of the number of real tokens
def mean_pool_forward(states, key_mask=None):
    """states [B, N, d] -> the mean over real tokens [B, d].

    v_b = sum_n m_bn s_bn / sum_n m_bn. A row without real tokens gives zeros.
    """
    B, N, _ = check_states("states", states).shape
    key_mask = check_key_mask("key_mask", key_mask, (B, N))
    real = np.ones((B, N), states.dtype) if key_mask is None else key_mask.astype(states.dtype)
    count = real.sum(axis=1, keepdims=True)                            # [B, 1]
    weights = real / N
    pooled = (weights[:, None, :] @ states)[:, 0]                      # [B, d]
    return pooled, MeanPoolCache(weights)
