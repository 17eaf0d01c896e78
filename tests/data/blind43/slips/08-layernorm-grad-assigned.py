# exercise: norm
# function: t08_norm.py:LayerNorm.backward
# slip: gamma's gradient is assigned, not accumulated
def backward(self, d_out, cache):
    """d_x from d_out; adds into gamma's and beta's gradients."""
    d_x, d_gamma, d_beta = layernorm_backward(d_out, cache)
    self.gamma.grad = d_gamma
    self.beta.grad += d_beta
    return d_x
