# exercise: ffn
# function: t07_ffn.py:swiglu_gate_backward
# slip: the gate's two gradients are returned in swapped order (d_u, d_g)
def swiglu_gate_backward(d_out, cache):
    """-> (d_g, d_u)."""
    d_u = d_out * cache.gated                               # forward: h = gated * u
    d_g = silu_backward(d_out * cache.value, cache.silu)    # forward: gated = SiLU(g)
    return d_u, d_g
