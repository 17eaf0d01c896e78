"""Mistakes in the feed-forward networks (t07_ffn.py): the FFN and SwiGLU's gate."""
from .registry import mistake

FFN = "t07_ffn.FFN.backward"
GATE = "t07_ffn.swiglu_gate_backward"
GATE_RECHECK = "h = SiLU(g) * u:  d_u = d_h * SiLU(g);  d_g = SiLU'(g) * d_h * u"
SWI = "t07_ffn.SwiGLU.backward"
FFN_RECHECK = "d_h = act'(h) * d_a"
SWI_RECHECK = "d_x = d_value W_up^T + d_g W_gate^T"

# -- FFN.backward -----------------------------------------------------------------------------------
mistake("ffn-activation-skipped", FFN, "d_h = act_backward(d_a, cache.act)", "d_h = d_a",
        "the activation's backward is skipped between W2 and W1", FFN_RECHECK)
mistake("ffn-relu-derivative-everywhere", FFN, "d_h = act_backward(d_a, cache.act)",
        "d_h = d_a * (cache.act.x > 0)",
        "the derivative of the FFN's own activation (GELU by default), not ReLU's step", FFN_RECHECK)
mistake("ffn-backward-always-gelu", FFN, "_, act_backward = ACTIVATIONS[self.activation]",
        "_, act_backward = ACTIVATIONS['gelu']",
        "use the backward of this FFN's own activation, ACTIVATIONS[self.activation]", FFN_RECHECK)

# -- swiglu_gate_backward ---------------------------------------------------------------------------
mistake("swiglu-gate-silu-skipped", GATE, "d_g = silu_backward(d_out * cache.value, cache.silu)",
        "d_g = d_out * cache.value", "d_g must go back through SiLU", GATE_RECHECK)
mistake("swiglu-value-times-value", GATE, "d_u = d_out * cache.gated", "d_u = d_out * cache.value",
        "d_u is d_h times the other factor SiLU(g), not times u itself", GATE_RECHECK)
mistake("swiglu-gate-without-value", GATE, "silu_backward(d_out * cache.value, cache.silu)",
        "silu_backward(d_out, cache.silu)", "d_g misses the factor u (the product rule)", GATE_RECHECK)
mistake("swiglu-gate-factors-swapped", GATE,
        ("d_u = d_out * cache.gated", "d_g = silu_backward(d_out * cache.value, cache.silu)"),
        ("d_u = d_out * cache.value", "d_g = silu_backward(d_out * cache.gated, cache.silu)"),
        "each factor's gradient is d_h times the OTHER factor: d_u = d_h SiLU(g), d_g = SiLU'(g) d_h u",
        GATE_RECHECK)
mistake("swiglu-gate-times-silu", GATE, "silu_backward(d_out * cache.value, cache.silu)",
        "d_out * cache.value * cache.gated", "d_g needs SiLU's derivative SiLU'(g), not SiLU(g) itself",
        GATE_RECHECK)
mistake("swiglu-value-times-gate-input", GATE, "d_u = d_out * cache.gated", "d_u = d_out * cache.silu.x",
        "d_u is d_h times SiLU(g), the activated gate, not the gate's input g", GATE_RECHECK)
mistake("swiglu-gate-sigmoid-derivative", GATE, "silu_backward(d_out * cache.value, cache.silu)",
        "d_out * cache.value * cache.silu.s",
        "SiLU's derivative is s (1 + g (1 - s)), the product rule of g s: sigmoid(g) alone is its first term",
        GATE_RECHECK)

# -- SwiGLU.backward --------------------------------------------------------------------------------
mistake("swiglu-only-up-path", SWI, "return d_x_up + d_x_gate", "return d_x_up",
        "x feeds both projections: d_x is the sum of what W_up and W_gate send back",
        SWI_RECHECK)
mistake("swiglu-only-gate-path", SWI, "return d_x_up + d_x_gate", "return d_x_gate",
        "x feeds both projections: d_x is the sum of what W_up and W_gate send back",
        SWI_RECHECK)
mistake("swiglu-gate-and-value-swapped", SWI, "d_g, d_value = swiglu_gate_backward", "d_value, d_g = swiglu_gate_backward",
        "the gate's two gradients are swapped: it returns (d_g, d_u) in that order",
        "d_g goes to W_gate, d_u to W_up")

# -- FFN.forward ------------------------------------------------------------------------------------
mistake("ffn-forward-activation-skipped", "t07_ffn.FFN.forward", "a, act = act_forward(h)",
        "a, act = h, act_forward(h)[1]", "the activation's output feeds W2; without it the FFN is linear",
        "y = act(x W1 + b1) W2 + b2")

# -- swiglu_gate_forward ----------------------------------------------------------------------------
mistake("swiglu-sigmoid-gate", "t07_ffn.swiglu_gate_forward", "gated, silu = silu_forward(g)",
        "_, silu = silu_forward(g)\n    gated = silu.s",
        "SwiGLU gates with SiLU(g) = g sigmoid(g), not sigmoid(g) alone (that is GLU)", "h = SiLU(g) * u")
mistake("swiglu-forward-silu-of-value", "t07_ffn.swiglu_gate_forward", "gated, silu = silu_forward(g)",
        "gated, silu = silu_forward(u)", "SiLU gates with the gate input g: h = SiLU(g) * u",
        "h = SiLU(g) * u")

# -- SwiGLU.forward ---------------------------------------------------------------------------------
mistake("swiglu-silu-on-the-value", "t07_ffn.SwiGLU.forward", "h, glu = swiglu_gate_forward(g, value)",
        "h, glu = swiglu_gate_forward(value, g)", "SiLU belongs on the gate projection x W_gate, not on x W_up",
        "h = SiLU(x W_gate) * (x W_up)")
mistake("swiglu-forward-gate-twice", "t07_ffn.SwiGLU.forward", "value, up = self.up.forward(x)",
        "value, up = self.gate.forward(x)", "the value branch is x W_up: W_gate is used twice and W_up never",
        "h = SiLU(x W_gate) * (x W_up)")
