"""Mistakes in the activations (t06_activations.py): ReLU, GELU (exact and tanh), SiLU."""
from .registry import mistake

ACT = "t06_activations"
GELU = "return d_out * (_Phi(x) + x * _phi(x))"
TANH_RECHECK = "d_x = d_y (0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2))"
SILU = "return d_out * s * (1 + x * (1 - s))"
SILU_RECHECK = "d_x = d_y s (1 + x (1 - s)), s = sigmoid(x)"

# -- relu_backward ----------------------------------------------------------------------------------
mistake("relu-no-upstream", f"{ACT}.relu_backward", "return d_out * (cache.x > 0)", "return (cache.x > 0) * 1.0",
        "the step [x > 0] is returned without d_out: the chain rule multiplies them",
        "d_x = d_y * [x > 0]")
mistake("relu-times-x", f"{ACT}.relu_backward", "return d_out * (cache.x > 0)", "return d_out * cache.x",
        "multiplied by x instead of by the step [x > 0]", "d_x = d_y * [x > 0]")
mistake("relu-step-at-zero", f"{ACT}.relu_backward", "(cache.x > 0)", "(cache.x >= 0)",
        "at x = 0 ReLU's slope is taken as 0 (the convention npformer and PyTorch share): x > 0, not >=",
        "d_x = d_y * [x > 0]")
mistake("relu-masks-by-upstream", f"{ACT}.relu_backward", "return d_out * (cache.x > 0)", "return d_out * (d_out > 0)",
        "the step tests the forward's input x, not the upstream gradient", "d_x = d_y * [x > 0]")

# -- gelu_backward ----------------------------------------------------------------------------------
mistake("gelu-no-x-phi", f"{ACT}.gelu_backward", GELU, "return d_out * _Phi(x)",
        "the derivative of x Phi(x) has a second term x phi(x) (the product rule)",
        "d_x = d_y (Phi(x) + x phi(x))")
mistake("gelu-no-Phi", f"{ACT}.gelu_backward", GELU, "return d_out * x * _phi(x)",
        "the term Phi(x) of the product rule is missing", "d_x = d_y (Phi(x) + x phi(x))")
mistake("gelu-phi-without-x", f"{ACT}.gelu_backward", GELU, "return d_out * (_Phi(x) + _phi(x))",
        "the second term is x phi(x), not phi(x)", "d_x = d_y (Phi(x) + x phi(x))")
mistake("gelu-density-unnormalised", f"{ACT}.gelu_backward", GELU, "return d_out * (_Phi(x) + x * np.exp(-0.5 * x * x))",
        "the normal density is exp(-x^2 / 2) / sqrt(2 pi): the 1 / sqrt(2 pi) is missing",
        "d_x = d_y (Phi(x) + x phi(x))")

# -- gelu_tanh_backward -----------------------------------------------------------------------------
mistake("gelu-tanh-cube-derivative", f"{ACT}.gelu_tanh_backward", "1 + 3 * GELU_A * x ** 2", "1 + GELU_A * x ** 2",
        "the derivative of a x^3 is 3 a x^2: the 3 is missing", TANH_RECHECK)
mistake("gelu-tanh-derivative-of-tanh", f"{ACT}.gelu_tanh_backward", "(1 - t ** 2)", "(1 - t)",
        "tanh'(u) is 1 - tanh(u)^2, not 1 - tanh(u)", TANH_RECHECK)
mistake("gelu-tanh-second-term-without-x", f"{ACT}.gelu_tanh_backward", "0.5 * x * (1 - t ** 2) * du",
        "0.5 * (1 - t ** 2) * du", "the second term of the product rule keeps its x: 0.5 x (1 - t^2) u'",
        TANH_RECHECK)
mistake("gelu-tanh-no-chain-through-u", f"{ACT}.gelu_tanh_backward", "0.5 * x * (1 - t ** 2) * du",
        "0.5 * x * (1 - t ** 2)", "the chain rule through u = c (x + a x^3) is missing: multiply by u'",
        TANH_RECHECK)
mistake("gelu-tanh-no-first-term", f"{ACT}.gelu_tanh_backward", "slope = 0.5 * (1 + t) + 0.5 * x",
        "slope = 0.5 * x", "the first term 0.5 (1 + t) of the product rule is missing", TANH_RECHECK)
mistake("gelu-tanh-second-half-dropped", f"{ACT}.gelu_tanh_backward", "0.5 * x * (1 - t ** 2) * du",
        "x * (1 - t ** 2) * du", "the 0.5 of y = 0.5 x (1 + t) belongs to the tanh term as well",
        TANH_RECHECK)
mistake("gelu-tanh-first-term-without-half", f"{ACT}.gelu_tanh_backward", "slope = 0.5 * (1 + t)", "slope = (1 + t)",
        "the product rule's first term keeps the 0.5: d/dx [0.5 x (1 + t)] = 0.5 (1 + t) + 0.5 x t'", TANH_RECHECK)

# -- silu_backward ----------------------------------------------------------------------------------
mistake("silu-sigmoid-derivative-only", f"{ACT}.silu_backward", SILU, "return d_out * s * (1 - s)",
        "that is the derivative of sigmoid(x); SiLU is x sigmoid(x), whose derivative is s + x s (1 - s)",
        SILU_RECHECK)
mistake("silu-first-term-only", f"{ACT}.silu_backward", SILU, "return d_out * s",
        "only the first term s: the product rule adds x s (1 - s)", SILU_RECHECK)
mistake("silu-sigmoid-derivative-squared", f"{ACT}.silu_backward", SILU, "return d_out * s * (1 + x * s)",
        "sigmoid'(x) is s (1 - s), not s^2", SILU_RECHECK)
mistake("silu-second-term-missing-s", f"{ACT}.silu_backward", SILU, "return d_out * (s + x * (1 - s))",
        "sigmoid' is s (1 - s): the second term is x s (1 - s), with its factor s", SILU_RECHECK)
mistake("silu-second-term-without-x", f"{ACT}.silu_backward", "return d_out * s * (1 + x * (1 - s))",
        "return d_out * (s + s * (1 - s))", "the second term of the product rule keeps x: x s (1 - s)",
        SILU_RECHECK)

# -- relu_forward -----------------------------------------------------------------------------------
mistake("relu-forward-reduction", f"{ACT}.relu_forward", "np.maximum(x, 0)", "np.max(x, 0)",
        "np.max(x, 0) is the largest entry along axis 0 (a reduction); elementwise it is np.maximum(x, 0)",
        "y = max(x, 0) elementwise")
mistake("relu-forward-step", f"{ACT}.relu_forward", "np.maximum(x, 0)", "(x > 0) * 1.0",
        "ReLU passes x where it is positive; the step [x > 0] is its derivative", "y = max(x, 0)")

# -- gelu_forward -----------------------------------------------------------------------------------
mistake("gelu-cache-keeps-output", f"{ACT}.gelu_forward", "return x * _Phi(x), ActivationCache(x)",
        "return x * _Phi(x), ActivationCache(x * _Phi(x))",
        "the cache must keep the input x: the backward evaluates GELU's derivative at x",
        "y = x Phi(x); backward needs x")
mistake("gelu-forward-density", f"{ACT}.gelu_forward", "return x * _Phi(x), ActivationCache(x)",
        "return x * _phi(x), ActivationCache(x)", "GELU multiplies x by the normal CDF Phi, not by the density phi",
        "y = x Phi(x)")
mistake("gelu-forward-erf-unscaled", f"{ACT}.gelu_forward", "return x * _Phi(x), ActivationCache(x)",
        "return 0.5 * x * (1 + erf(x)), ActivationCache(x)",
        "the normal CDF is 0.5 (1 + erf(x / sqrt 2)): the division by sqrt 2 inside erf is missing",
        "y = x Phi(x), Phi(x) = 0.5 (1 + erf(x / sqrt 2))")
mistake("gelu-forward-tanh-approximation", f"{ACT}.gelu_forward", "return x * _Phi(x), ActivationCache(x)",
        "return 0.5 * x * (1 + np.tanh(GELU_C * (x + GELU_A * x ** 3))), ActivationCache(x)",
        "this is the tanh approximation (gelu_tanh); the exact GELU uses the normal CDF Phi",
        "y = x Phi(x), Phi(x) = 0.5 (1 + erf(x / sqrt 2))")
mistake("gelu-forward-without-x", f"{ACT}.gelu_forward", "return x * _Phi(x), ActivationCache(x)",
        "return _Phi(x), ActivationCache(x)", "GELU is x times Phi(x): Phi alone is the gate", "y = x Phi(x)")

# -- gelu_tanh_forward ------------------------------------------------------------------------------
mistake("gelu-tanh-forward-square", f"{ACT}.gelu_tanh_forward", "GELU_A * x ** 3", "GELU_A * x ** 2",
        "the cubic term: u = c (x + 0.044715 x^3)", "y = 0.5 x (1 + tanh(c (x + a x^3)))")
mistake("gelu-tanh-forward-brackets", f"{ACT}.gelu_tanh_forward", "u = GELU_C * (x + GELU_A * x ** 3)",
        "u = GELU_C * x + GELU_A * x ** 3", "sqrt(2/pi) multiplies the whole bracket: u = c (x + a x^3)",
        "y = 0.5 x (1 + tanh(c (x + a x^3)))")
mistake("gelu-tanh-forward-without-half", f"{ACT}.gelu_tanh_forward", "return 0.5 * x * (1 + t)", "return x * (1 + t)",
        "the tanh form is 0.5 x (1 + tanh(u)): 0.5 (1 + tanh) plays Phi's part", "y = 0.5 x (1 + tanh(u))")

# -- silu_forward -----------------------------------------------------------------------------------
mistake("silu-forward-without-x", f"{ACT}.silu_forward", "return x * s, SiluCache(x, s)",
        "return s, SiluCache(x, s)", "SiLU is x times the sigmoid, not the sigmoid alone",
        "y = x sigmoid(x)")
mistake("silu-forward-sigmoid-sign", f"{ACT}.silu_forward", "s = sigmoid(x)", "s = 1 / (1 + np.exp(x))",
        "sigmoid(x) = 1 / (1 + e^-x): with e^+x it is sigmoid(-x)", "y = x / (1 + e^-x)")
