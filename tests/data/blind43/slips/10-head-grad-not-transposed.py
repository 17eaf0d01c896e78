# exercise: model
# function: t10_model.py:TiedHead.backward
# slip: the head's gradient is added to the table without the transpose
def backward(self, d_out, cache):
    """d_x from d_logits; adds the head's share into the token table's gradient."""
    d_x, d_weight_t, _ = linear_backward(d_out, cache)          # undoes logits = x E^T
    self.weight.grad += d_weight_t                             # d_E = (x^T d_logits)^T
    return d_x
