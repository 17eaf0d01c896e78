# exercise: ffn
# function: t07_ffn.py:SwiGLU.backward
# slip: x feeds both projections but only the up projection's gradient is returned
def backward(self, d_out, cache):
    """d_x from d_out, through W_down, the gate and both projections."""
    d_h = self.down.backward(d_out, cache.down)          # forward: y = h W_down
    d_g, d_value = swiglu_gate_backward(d_h, cache.glu)  # forward: h = SiLU(g) * value
    d_x_up = self.up.backward(d_value, cache.up)         # forward: value = x W_up
    d_x_gate = self.gate.backward(d_g, cache.gate)       # forward: g = x W_gate
    return d_x_up                             # x feeds both projections
