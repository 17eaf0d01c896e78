# exercise: ffn
# function: t07_ffn.py:SwiGLU.backward
# slip: the gate's gradient is sent into the up projection and the value's into the gate projection
def backward(self, d_out, cache):
    """d_x from d_out, through W_down, the gate and both projections."""
    d_h = self.down.backward(d_out, cache.down)          # forward: y = h W_down
    d_g, d_value = swiglu_gate_backward(d_h, cache.glu)  # forward: h = SiLU(g) * value
    d_x_up = self.up.backward(d_g, cache.up)         # forward: value = x W_up
    d_x_gate = self.gate.backward(d_value, cache.gate)       # forward: g = x W_gate
    return d_x_up + d_x_gate                             # x feeds both projections
