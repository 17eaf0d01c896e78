# exercise: model
# function: t10_model.py:TiedHead.backward
# slip: the tied table's gradient is assigned by the head, wiping the embedding's share
def backward(self, d_out, cache):
    """d_x from d_logits; adds the head's share into the token table's gradient."""
    d_x, d_weight_t, _ = linear_backward(d_out, cache)          # undoes logits = x E^T
    self.weight.grad = d_weight_t.T                             # d_E = (x^T d_logits)^T
    return d_x
