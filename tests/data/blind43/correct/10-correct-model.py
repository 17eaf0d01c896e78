# exercise: model
# function: t10_model.py:TiedHead.backward
# correct: the two products written directly, without linear_backward
def backward(self, d_out, cache):
    x, table_t = cache.x, cache.weight                   # logits = x @ E^T
    V, d = d_out.shape[-1], x.shape[-1]
    d_x = d_out @ table_t.T
    self.weight.grad += d_out.reshape(-1, V).T @ x.reshape(-1, d)
    return d_x
