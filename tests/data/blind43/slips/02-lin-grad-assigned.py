# exercise: linear
# function: t02_linear.py:Linear.backward
# slip: the weight's gradient is assigned, not accumulated into .grad
def backward(self, d_out, cache):
    """d_x from d_out; adds dW and db into the parameters' gradients."""
    d_x, d_weight, d_bias = linear_backward(d_out, cache)
    self.weight.grad = d_weight
    if self.bias is not None:
        self.bias.grad += d_bias
    return d_x
