# exercise: ffn
# function: t07_ffn.py:SwiGLU.forward
# slip: gate and up are swapped in the forward: SiLU is applied to the up projection
def forward(self, x):
    """x [..., d] -> (y [..., d], cache); position-wise like ``FFN``."""
    g, gate = self.gate.forward(x)                       # [..., hidden]
    value, up = self.up.forward(x)
    h, glu = swiglu_gate_forward(value, g)
    y, down = self.down.forward(h)                       # [..., d]
    return y, SwiGLUCache(gate, up, glu, down)
