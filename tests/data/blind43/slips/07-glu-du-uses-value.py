# exercise: ffn
# function: t07_ffn.py:swiglu_gate_backward
# slip: d_u is multiplied by u itself instead of by SiLU(g)
def swiglu_gate_backward(d_out, cache):
    """-> (d_g, d_u)."""
    d_u = d_out * cache.value                               # forward: h = gated * u
    d_g = silu_backward(d_out * cache.value, cache.silu)    # forward: gated = SiLU(g)
    return d_g, d_u
