# exercise: ffn
# function: t07_ffn.py:swiglu_gate_backward
# slip: the gradient of g skips SiLU's derivative
def swiglu_gate_backward(d_out, cache):
    """-> (d_g, d_u)."""
    d_u = d_out * cache.gated                               # forward: h = gated * u
    d_g = d_out * cache.value    # forward: gated = SiLU(g)
    return d_g, d_u
