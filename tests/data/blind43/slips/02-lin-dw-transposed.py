# exercise: linear
# function: t02_linear.py:linear_backward
# slip: the weight gradient is transposed: d_y^T x instead of x^T d_y
def linear_backward(d_out, cache):
    """-> (d_x, d_weight, d_bias); d_bias is None without a bias."""
    x, weight = cache.x, cache.weight
    # forward: y = x @ W + b
    d_x = d_out @ weight.T                                    # [..., d_in]
    x_rows = x.reshape(-1, x.shape[-1])                       # every position is one row: [B*N, d_in]
    d_rows = d_out.reshape(-1, d_out.shape[-1])               # [B*N, d_out]
    d_weight = d_rows.T @ x_rows                              # each position adds x^T d_y
    d_bias = sum_over_positions(d_out) if cache.has_bias else None
    return d_x, d_weight, d_bias
