# exercise: ffn
# function: t07_ffn.py:FFN.backward
# slip: the backward skips the activation's derivative
def backward(self, d_out, cache):
    """d_x from d_out, through W2, the activation and W1."""
    _, act_backward = ACTIVATIONS[self.activation]
    d_a = self.down.backward(d_out, cache.down)          # forward: y = a W2 + b2
    d_h = d_a
    return self.up.backward(d_h, cache.up)               # forward: h = x W1 + b1
