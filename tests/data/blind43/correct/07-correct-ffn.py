# exercise: ffn
# function: t07_ffn.py:swiglu_gate_backward
# correct: SiLU's derivative written out from the cached sigmoid instead of calling silu_backward
def swiglu_gate_backward(d_out, cache):
    g, sig = cache.silu.x, cache.silu.s
    d_u = d_out * g * sig
    d_g = d_out * cache.value * sig * (1.0 + g * (1.0 - sig))
    return d_g, d_u
