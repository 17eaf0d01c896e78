# exercise: linear
# function: t02_linear.py:linear_backward
# slip: the bias gradient is the mean over positions, not the sum
def linear_backward(d_out, cache):
    """-> (d_x, d_weight, d_bias); d_bias is None without a bias."""
    x, weight = cache.x, cache.weight
    # forward: y = x @ W + b
    d_x = d_out @ weight.T                                    # [..., d_in]
    x_rows = x.reshape(-1, x.shape[-1])                       # every position is one row: [B*N, d_in]
    d_rows = d_out.reshape(-1, d_out.shape[-1])               # [B*N, d_out]
    d_weight = x_rows.T @ d_rows                              # each position adds x^T d_y
    d_bias = d_out.reshape(-1, d_out.shape[-1]).mean(axis=0) if cache.has_bias else None
    return d_x, d_weight, d_bias
