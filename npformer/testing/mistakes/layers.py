"""Mistakes in the linear layer (t02_linear.py), the embeddings (t01_embedding.py), the FFN and
SwiGLU (t07_ffn.py) and the norms (t08_norm.py)."""
from .registry import mistake

LIN = "t02_linear.linear_backward"
LIN_RECHECK = "d_x = d_y W^T;  d_W = sum over positions of x^T d_y;  d_b = sum over positions of d_y"
mistake("linear-weight-transposed", LIN, "d_weight = x_rows.T @ d_rows", "d_weight = d_rows.T @ x_rows",
        "d_W comes out transposed: it is x^T d_y, [d_in, d_out] like W", LIN_RECHECK)
mistake("linear-bias-first-axis-only", LIN, "d_bias = sum_over_positions(d_out) if cache.has_bias",
        "d_bias = d_out.sum(axis=0) if cache.has_bias",
        "d_b sums over axis 0 only; with positions as well as a batch it sums over every axis but "
        "the last", LIN_RECHECK)
mistake("linear-bias-mean", LIN, "d_bias = sum_over_positions(d_out) if cache.has_bias",
        "d_bias = d_out.reshape(-1, d_out.shape[-1]).mean(axis=0) if cache.has_bias",
        "d_b is a sum over the positions, not a mean: every position added b", LIN_RECHECK)
mistake("linear-weight-first-sequence", LIN, "d_weight = x_rows.T @ d_rows", "d_weight = x[0].T @ d_out[0]",
        "d_W from the first sequence only: every position of every sequence adds its x^T d_y",
        LIN_RECHECK)
mistake("linear-weight-assigned", "t02_linear.Linear.backward", "self.weight.grad += d_weight",
        "self.weight.grad = d_weight", "weight.grad is assigned, not accumulated: a layer used twice "
        "must receive both gradients (+=)", "weight.grad += d_W")
mistake("linear-bias-assigned", "t02_linear.Linear.backward", "self.bias.grad += d_bias",
        "self.bias.grad = d_bias", "bias.grad is assigned, not accumulated (+=)", "bias.grad += d_b")
mistake("linear-forward-no-bias", "t02_linear.linear_forward", "y = y + bias", "y = y",
        "the bias is never added", "y = x W + b")

# -- the embeddings ---------------------------------------------------------------------------------
EMB = "t01_embedding.Embedding.backward"
EMB_RECHECK = "np.add.at(d_E, ids, d_rows): every position adds its d_out into the row it read"
mistake("embedding-fancy-index-add", EMB, "np.add.at(self.weight.grad, ids, d_rows)",
        "self.weight.grad[ids] += d_rows",
        "grad[ids] += ... keeps one of the gradients of an id read twice; np.add.at adds them all",
        EMB_RECHECK)
mistake("embedding-assigned", EMB, "np.add.at(self.weight.grad, ids, d_rows)", "self.weight.grad[ids] = d_rows",
        "the rows' gradients are assigned, not added: repeated ids and earlier passes are lost", EMB_RECHECK)
mistake("embedding-padding-row-learns", EMB,
        "d_rows = np.where((ids == self.padding_idx)[:, None], 0, d_rows)", "d_rows = d_rows",
        "the padding row must stay frozen: positions reading it send nothing back", EMB_RECHECK)
EMBS = "t01_embedding.Embeddings.backward"
mistake("positions-averaged-over-batch", EMBS, "d_x.sum(axis=0) if shared else d_x",
        "d_x.mean(axis=0) if shared else d_x",
        "positions shared by the whole batch receive the sum over the batch, not the mean",
        "d_P[p] = sum over the batch of d_x[:, p]")
mistake("positions-first-sequence", EMBS, "d_x.sum(axis=0) if shared else d_x", "d_x[0] if shared else d_x",
        "positions shared by the whole batch receive every sequence's gradient, not the first one's",
        "d_P[p] = sum over the batch of d_x[:, p]")
mistake("embeddings-scale-forgotten", EMBS, "d_x * self.scale if self.scale != 1.0 else d_x", "d_x",
        "the token rows were multiplied by ``scale``: their gradient is multiplied by it too",
        "x = scale * E[ids] + ...: d_E[ids] += scale * d_x")
mistake("embeddings-norm-skipped", EMBS, "d_x = self.norm.backward(d_x, cache.norm)", "d_x = d_x",
        "the embedding norm's backward is skipped", "x = Norm(sum of the lookups): undo the norm first")
mistake("embeddings-segments-skipped", EMBS, "self.segments.backward(d_x, cache.segments)", "None",
        "the segment table receives no gradient", "x = ... + S[segments]: d_S[segments] += d_x")

# -- the feed-forward networks ----------------------------------------------------------------------
FFN = "t07_ffn.FFN.backward"
mistake("ffn-activation-skipped", FFN, "d_h = act_backward(d_a, cache.act)", "d_h = d_a",
        "the activation's backward is skipped between W2 and W1", "d_h = act'(h) * d_a")
GATE = "t07_ffn.swiglu_gate_backward"
GATE_RECHECK = "h = SiLU(g) * u:  d_u = d_h * SiLU(g);  d_g = SiLU'(g) * d_h * u"
mistake("swiglu-gate-silu-skipped", GATE, "d_g = silu_backward(d_out * cache.value, cache.silu)",
        "d_g = d_out * cache.value", "d_g must go back through SiLU", GATE_RECHECK)
mistake("swiglu-value-times-value", GATE, "d_u = d_out * cache.gated", "d_u = d_out * cache.value",
        "d_u is d_h times the other factor SiLU(g), not times u itself", GATE_RECHECK)
mistake("swiglu-gate-without-value", GATE, "silu_backward(d_out * cache.value, cache.silu)",
        "silu_backward(d_out, cache.silu)", "d_g misses the factor u (the product rule)", GATE_RECHECK)
SWI = "t07_ffn.SwiGLU.backward"
mistake("swiglu-only-up-path", SWI, "return d_x_up + d_x_gate", "return d_x_up",
        "x feeds both projections: d_x is the sum of what W_up and W_gate send back",
        "d_x = d_value W_up^T + d_g W_gate^T")
mistake("swiglu-only-gate-path", SWI, "return d_x_up + d_x_gate", "return d_x_gate",
        "x feeds both projections: d_x is the sum of what W_up and W_gate send back",
        "d_x = d_value W_up^T + d_g W_gate^T")
mistake("swiglu-gate-and-value-swapped", SWI, "d_g, d_value = swiglu_gate_backward", "d_value, d_g = swiglu_gate_backward",
        "the gate's two gradients are swapped: it returns (d_g, d_u) in that order",
        "d_g goes to W_gate, d_u to W_up")

# -- the norms ----------------------------------------------------------------------------------------
LN = "t08_norm.layernorm_backward"
LN_RECHECK = "d_x = rstd (d_xhat - mean(d_xhat) - xhat mean(d_xhat xhat)), d_xhat = d_y gamma, means over d"
MEAN_TERM = " - d_xhat.mean(axis=-1, keepdims=True)"
VAR_TERM = "\n                  - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))"
mistake("layernorm-no-mean-path", LN, f"(d_xhat{MEAN_TERM}", "(d_xhat",
        "the path through the mean is missing: - mean(d_xhat)", LN_RECHECK)
mistake("layernorm-no-variance-path", LN, VAR_TERM, ")",
        "the path through the variance is missing: - xhat mean(d_xhat xhat)", LN_RECHECK)
mistake("layernorm-gamma-forgotten", LN, "d_xhat = d_out * cache.gamma", "d_xhat = d_out",
        "y = gamma xhat + beta: d_xhat is d_y times gamma", LN_RECHECK)
mistake("layernorm-rstd-forgotten", LN, "d_x = rstd * (", "d_x = (",
        "the whole bracket is multiplied by rstd = 1 / sqrt(var + eps)", LN_RECHECK)
mistake("layernorm-mean-over-axis-0", LN, MEAN_TERM, " - d_xhat.mean(axis=0, keepdims=True)",
        "the mean of d_xhat runs over the features (axis=-1), not over axis 0", LN_RECHECK)
mistake("layernorm-gamma-not-summed", LN, "d_gamma = sum_over_positions(d_out * xhat)",
        "d_gamma = (d_out * xhat).sum(axis=0)",
        "d_gamma sums over every position (every axis but the last), not only axis 0",
        "d_gamma = sum over positions of d_y xhat")
mistake("layernorm-beta-not-summed", LN, "d_beta = sum_over_positions(d_out)", "d_beta = d_out.sum(axis=0)",
        "d_beta sums over every position (every axis but the last), not only axis 0",
        "d_beta = sum over positions of d_y")
mistake("layernorm-variance-term-without-xhat", LN, "\n                  - xhat * (d_xhat * xhat)",
        "\n                  - (d_xhat * xhat)", "the variance term is xhat times mean(d_xhat xhat)",
        LN_RECHECK)
RMS = "t08_norm.rmsnorm_backward"
RMS_RECHECK = "d_x = rstd (d_xhat - xhat mean(d_xhat xhat)), d_xhat = d_y gamma, the mean over d"
mistake("rmsnorm-no-rms-path", RMS, " - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))", ")",
        "the path through the rms is missing: - xhat mean(d_xhat xhat)", RMS_RECHECK)
mistake("rmsnorm-gamma-forgotten", RMS, "d_xhat = d_out * cache.gamma", "d_xhat = d_out",
        "y = gamma xhat: d_xhat is d_y times gamma", RMS_RECHECK)
mistake("rmsnorm-rstd-forgotten", RMS, "d_x = rstd * (", "d_x = (",
        "the whole bracket is multiplied by rstd = 1 / rms", RMS_RECHECK)
mistake("rmsnorm-sum-not-mean", RMS, "(d_xhat * xhat).mean(axis=-1", "(d_xhat * xhat).sum(axis=-1",
        "the rms is a mean over the d features: its term carries a 1/d (mean, not sum)", RMS_RECHECK)
mistake("layernorm-gamma-assigned", "t08_norm.LayerNorm.backward", "self.gamma.grad += d_gamma",
        "self.gamma.grad = d_gamma", "gamma.grad is assigned, not accumulated (+=)", "gamma.grad += d_gamma")
mistake("rmsnorm-gamma-assigned", "t08_norm.RMSNorm.backward", "self.gamma.grad += d_gamma",
        "self.gamma.grad = d_gamma", "gamma.grad is assigned, not accumulated (+=)", "gamma.grad += d_gamma")
mistake("layernorm-eps-outside-sqrt", "t08_norm.layernorm_forward", "rstd = 1 / np.sqrt(var + eps)",
        "rstd = 1 / (np.sqrt(var) + eps)", "eps goes inside the square root: sqrt(var + eps)",
        "xhat = (x - mean) / sqrt(var + eps)")

# -- more shapes of the same mistakes ---------------------------------------------------------------
mistake("linear-weight-mean-over-rows", LIN, "d_weight = x_rows.T @ d_rows", "d_weight = x_rows.T @ d_rows / len(x_rows)",
        "d_W is a sum over the positions, not a mean: any averaging of the loss is already in d_out",
        LIN_RECHECK)
mistake("linear-bias-first-two-axes", LIN, "d_bias = sum_over_positions(d_out) if cache.has_bias",
        "d_bias = d_out.sum(axis=(0, 1)) if cache.has_bias",
        "summing axes (0, 1) assumes a [B, N, d] input: d_b sums over every axis but the last",
        LIN_RECHECK)
mistake("linear-weight-per-sequence-sum", LIN, "d_weight = x_rows.T @ d_rows",
        "d_weight = (x.swapaxes(-1, -2) @ d_out).sum(axis=0)",
        "summing per-sequence products over axis 0 assumes a [B, N, d] input: flatten every leading "
        "axis into rows", LIN_RECHECK)
mistake("linear-bias-never-added", "t02_linear.Linear.backward", "self.bias.grad += d_bias", "pass",
        "the bias gradient is computed but never added into bias.grad", "bias.grad += d_b")
mistake("positions-before-the-norm", EMBS, "self.positions.backward(d_x.sum(axis=0) if shared else d_x",
        "self.positions.backward(d_out.sum(axis=0) if shared else d_out",
        "the position table receives the gradient after the norm's backward (d_x), not d_out",
        "x = Norm(E[ids] + P[positions]): undo the norm, then the lookups")
mistake("ffn-relu-derivative-everywhere", FFN, "d_h = act_backward(d_a, cache.act)",
        "d_h = d_a * (cache.act.x > 0)",
        "the derivative of the FFN's own activation (GELU by default), not ReLU's step", "d_h = act'(h) * d_a")
mistake("ffn-forward-activation-skipped", "t07_ffn.FFN.forward", "a, act = act_forward(h)",
        "a, act = h, act_forward(h)[1]", "the activation's output feeds W2; without it the FFN is linear",
        "y = act(x W1 + b1) W2 + b2")
mistake("swiglu-silu-on-the-value", "t07_ffn.SwiGLU.forward", "h, glu = swiglu_gate_forward(g, value)",
        "h, glu = swiglu_gate_forward(value, g)", "SiLU belongs on the gate projection x W_gate, not on x W_up",
        "h = SiLU(x W_gate) * (x W_up)")
mistake("layernorm-means-over-axis-0", LN, (MEAN_TERM, "(d_xhat * xhat).mean(axis=-1, keepdims=True))"),
        (" - d_xhat.mean(axis=0, keepdims=True)", "(d_xhat * xhat).mean(axis=0, keepdims=True))"),
        "the backward's means run over the d features of each position (axis -1), like the forward's",
        LN_RECHECK)
mistake("layernorm-divides-by-rstd", LN, "d_x = rstd * (", "d_x = 1 / rstd * (",
        "rstd is already 1 / sqrt(var + eps): the bracket is multiplied by it", LN_RECHECK)
mistake("layernorm-gamma-without-xhat", LN, "d_gamma = sum_over_positions(d_out * xhat)",
        "d_gamma = sum_over_positions(d_out)", "gamma multiplies xhat: d_gamma sums d_y xhat, not d_y",
        "d_gamma = sum over positions of d_y xhat")
mistake("rmsnorm-with-a-mean-term", RMS, "d_x = rstd * (d_xhat - xhat",
        "d_x = rstd * (d_xhat - d_xhat.mean(axis=-1, keepdims=True) - xhat",
        "RMSNorm does not centre: its backward has no - mean(d_xhat) term (that is LayerNorm's backward, "
        "written or called here)", RMS_RECHECK)
mistake("layernorm-module-assigns-both", "t08_norm.LayerNorm.backward",
        ("self.gamma.grad += d_gamma", "self.beta.grad += d_beta"),
        ("self.gamma.grad = d_gamma", "self.beta.grad = d_beta"),
        "gamma.grad and beta.grad are assigned, not accumulated (+=)", "gamma.grad += d_gamma; beta.grad += d_beta")
mistake("layernorm-unbiased-variance", "t08_norm.layernorm_forward",
        "var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
        "var = ((x - mean) ** 2).sum(axis=-1, keepdims=True) / (x.shape[-1] - 1)",
        "LayerNorm uses the biased variance (divide by d), not the unbiased one (d - 1)",
        "var = mean over d of (x - mean)^2")
mistake("rmsnorm-sum-of-squares", "t08_norm.rmsnorm_forward", "(x ** 2).mean(axis=-1, keepdims=True)",
        "(x ** 2).sum(axis=-1, keepdims=True)", "the rms is the root of the mean of the squares, not of their sum",
        "xhat = x / sqrt(mean(x^2) + eps)")
SIN = "t01_embedding.sinusoid_table"
SIN_RECHECK = "PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i), w_i = base^(-2i/d), p from 0"
mistake("sinusoid-two-i-doubled", SIN, "w = base ** (-np.arange(0, d, 2) / d)", "w = base ** (-2 * np.arange(0, d, 2) / d)",
        "np.arange(0, d, 2) is already 2i: doubling it again makes the frequencies fall twice as fast", SIN_RECHECK)
mistake("sinusoid-positive-exponent", SIN, "w = base ** (-np.arange(0, d, 2) / d)", "w = base ** (np.arange(0, d, 2) / d)",
        "the frequencies are base^(-2i/d): the exponent is negative", SIN_RECHECK)
mistake("sinusoid-sin-cos-swapped", SIN, ("table[:, 0::2] = np.sin(p * w)", "table[:, 1::2] = np.cos(p * w[: d // 2])"),
        ("table[:, 0::2] = np.cos(p * w)", "table[:, 1::2] = np.sin(p * w[: d // 2])"),
        "even columns hold the sines, odd columns the cosines", SIN_RECHECK)
mistake("sinusoid-halves-layout", SIN, ("table[:, 0::2] = np.sin(p * w)", "table[:, 1::2] = np.cos(p * w[: d // 2])"),
        ("table[:, : (d + 1) // 2] = np.sin(p * w)", "table[:, (d + 1) // 2:] = np.cos(p * w[: d // 2])"),
        "sines and cosines alternate (even, odd columns), not the first half and the second half", SIN_RECHECK)
mistake("sinusoid-positions-from-one", SIN, "p = np.arange(max_len)[:, None]", "p = np.arange(1, max_len + 1)[:, None]",
        "positions start at 0: the first row is sin 0 = 0, cos 0 = 1", SIN_RECHECK)
mistake("embedding-padding-row-zeroed", EMB, "np.add.at(self.weight.grad, ids, d_rows)",
        "np.add.at(self.weight.grad, ids, d_out.reshape(-1, d))\n"
        "    if self.padding_idx is not None:\n        self.weight.grad[self.padding_idx] = 0",
        "zeroing the padding row after adding also erases what was already in its gradient (a tied head, "
        "an earlier pass): leave out the positions that read padding instead", EMB_RECHECK)
mistake("ffn-backward-always-gelu", FFN, "_, act_backward = ACTIVATIONS[self.activation]",
        "_, act_backward = ACTIVATIONS['gelu']",
        "use the backward of this FFN's own activation, ACTIVATIONS[self.activation]", "d_h = act'(h) * d_a")
mistake("swiglu-sigmoid-gate", "t07_ffn.swiglu_gate_forward", "gated, silu = silu_forward(g)",
        "_, silu = silu_forward(g)\n    gated = silu.s",
        "SwiGLU gates with SiLU(g) = g sigmoid(g), not sigmoid(g) alone (that is GLU)", "h = SiLU(g) * u")
mistake("layernorm-sums-not-means", LN, ("d_xhat.mean(axis=-1", "(d_xhat * xhat).mean(axis=-1"),
        ("d_xhat.sum(axis=-1", "(d_xhat * xhat).sum(axis=-1"),
        "the two correction terms are means over the d features (they carry 1/d), not sums", LN_RECHECK)
mistake("layernorm-module-gamma-beta-swapped", "t08_norm.LayerNorm.backward",
        "d_x, d_gamma, d_beta = layernorm_backward(d_out, cache)", "d_x, d_beta, d_gamma = layernorm_backward(d_out, cache)",
        "layernorm_backward returns (d_x, d_gamma, d_beta): the gain's and the shift's gradients are swapped",
        "gamma.grad += d_gamma; beta.grad += d_beta")
mistake("layernorm-module-beta-assigned", "t08_norm.LayerNorm.backward", "self.beta.grad += d_beta",
        "self.beta.grad = d_beta", "beta.grad is assigned, not accumulated (+=)", "beta.grad += d_beta")
mistake("rmsnorm-module-gain-never-added", "t08_norm.RMSNorm.backward", "self.gamma.grad += d_gamma", "pass",
        "d_gamma is computed but never added into gamma.grad", "gamma.grad += d_gamma")
mistake("layernorm-forward-over-axis-0", "t08_norm.layernorm_forward",
        ("mean = x.mean(axis=-1, keepdims=True)", "var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)"),
        ("mean = x.mean(axis=0, keepdims=True)", "var = ((x - mean) ** 2).mean(axis=0, keepdims=True)"),
        "LayerNorm normalises each position over its d features (axis -1), not over the batch",
        "mean and var over the last axis")
mistake("rmsnorm-forward-variance", "t08_norm.rmsnorm_forward", "(x ** 2).mean(axis=-1, keepdims=True)",
        "x.var(axis=-1, keepdims=True)", "RMSNorm divides by the root mean square, not the standard deviation",
        "xhat = x / sqrt(mean(x^2) + eps)")
mistake("sinusoid-exponent-i-over-d", SIN, "w = base ** (-np.arange(0, d, 2) / d)", "w = base ** (-np.arange(d // 2) / d)",
        "the exponent is 2i/d (the even column index over d), not i/d: the frequencies fall too slowly",
        SIN_RECHECK)
RMS_FWD = "t08_norm.rmsnorm_forward"
mistake("rmsnorm-backward-rstd-on-first-term", RMS,
        "d_x = rstd * (d_xhat - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))",
        "d_x = rstd * d_xhat - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True)",
        "brackets: rstd multiplies the correction term too, rstd (d_xhat - xhat mean(d_xhat xhat))", RMS_RECHECK)
mistake("rmsnorm-forward-no-root", RMS_FWD, "rstd = 1 / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + eps)",
        "rstd = 1 / ((x ** 2).mean(axis=-1, keepdims=True) + eps)",
        "x is divided by the root of the mean square, not by the mean square itself",
        "rms(x) = sqrt(mean(x^2) + eps)")
mistake("layernorm-beta-gets-gamma-gradient", "t08_norm.LayerNorm.backward", "self.beta.grad += d_beta",
        "self.beta.grad += d_gamma", "beta's gradient is d_out summed over the positions (d_beta), not gamma's",
        "d_gamma = sum d_y xhat;  d_beta = sum d_y")
mistake("swiglu-gate-factors-swapped", GATE,
        ("d_u = d_out * cache.gated", "d_g = silu_backward(d_out * cache.value, cache.silu)"),
        ("d_u = d_out * cache.value", "d_g = silu_backward(d_out * cache.gated, cache.silu)"),
        "each factor's gradient is d_h times the OTHER factor: d_u = d_h SiLU(g), d_g = SiLU'(g) d_h u",
        GATE_RECHECK)

# -- written as a learner writes them ------------------------------------------------------------
mistake("linear-weight-subtracted", "t02_linear.Linear.backward", "self.weight.grad += d_weight",
        "self.weight.grad -= d_weight", "backward adds the gradient into .grad; subtracting it is the "
        "optimiser's step, taken later", "weight.grad += d_W")
mistake("linear-forward-scaled", "t02_linear.linear_forward", "y = x @ weight", "y = x @ weight / np.sqrt(x.shape[-1])",
        "a linear layer is x W + b: the 1/sqrt(d) belongs to the initialisation (or to attention's "
        "scores), not to the forward", "y = x W + b")
mistake("segments-before-the-norm", EMBS, "self.segments.backward(d_x, cache.segments)",
        "self.segments.backward(d_out, cache.segments)",
        "the segment rows were added before the norm: they receive the gradient after the norm's "
        "backward, like the tokens", "x = Norm(E[ids] + S[segments] + P): undo the norm first")
mistake("sinusoid-odd-width", SIN, "np.cos(p * w[: d // 2])", "np.cos(p * w)",
        "with an odd width there is one cosine column fewer than sine columns: take the first d // 2 "
        "frequencies", SIN_RECHECK)
mistake("swiglu-gate-times-silu", GATE, "silu_backward(d_out * cache.value, cache.silu)",
        "d_out * cache.value * cache.gated", "d_g needs SiLU's derivative SiLU'(g), not SiLU(g) itself",
        GATE_RECHECK)
mistake("swiglu-value-times-gate-input", GATE, "d_u = d_out * cache.gated", "d_u = d_out * cache.silu.x",
        "d_u is d_h times SiLU(g), the activated gate, not the gate's input g", GATE_RECHECK)
mistake("swiglu-forward-gate-twice", "t07_ffn.SwiGLU.forward", "value, up = self.up.forward(x)",
        "value, up = self.gate.forward(x)", "the value branch is x W_up: W_gate is used twice and W_up never",
        "h = SiLU(x W_gate) * (x W_up)")
mistake("layernorm-gamma-sum-first-two-axes", LN, "d_gamma = sum_over_positions(d_out * xhat)",
        "d_gamma = (d_out * xhat).sum(axis=(0, 1))",
        "d_gamma sums over every axis but the features, whatever the input's rank ([N, d], [B, N, d]...)",
        LN_RECHECK)
mistake("layernorm-variance-path-halved", LN, "- xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))",
        "- 0.5 * xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))",
        "the variance path lost a factor 2: d(x - mean)^2 / dx = 2 (x - mean), which cancels the -1/2 of "
        "var^(-1/2)", LN_RECHECK)
mistake("rmsnorm-rms-path-halved", RMS, "d_x = rstd * (d_xhat - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))",
        "d_x = rstd * (d_xhat - 0.5 * xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))",
        "the path through the rms lost a factor 2: d(x^2)/dx = 2x, which cancels the -1/2 of ms^(-1/2)",
        RMS_RECHECK)
mistake("layernorm-forward-mean-over-axis-0", "t08_norm.layernorm_forward", "mean = x.mean(axis=-1, keepdims=True)",
        "mean = x.mean(axis=0, keepdims=True)",
        "the mean is over each position's d features (axis -1), not over the batch", "mean over the last axis")
mistake("linear-dx-not-transposed", LIN, "d_x = d_out @ weight.T", "d_x = d_out @ weight",
        "d_x = d_y W^T: W is [d_in, d_out], so it comes back transposed", LIN_RECHECK)
mistake("swiglu-forward-silu-of-value", "t07_ffn.swiglu_gate_forward", "gated, silu = silu_forward(g)",
        "gated, silu = silu_forward(u)", "SiLU gates with the gate input g: h = SiLU(g) * u",
        "h = SiLU(g) * u")
mistake("layernorm-mean-path-sign", LN, " - d_xhat.mean(axis=-1, keepdims=True)", " + d_xhat.mean(axis=-1, keepdims=True)",
        "the path through the mean subtracts: the mean moves with every x_j", LN_RECHECK)
mistake("layernorm-variance-path-sign", LN, "\n                  - xhat * (d_xhat * xhat)",
        "\n                  + xhat * (d_xhat * xhat)",
        "the path through the variance subtracts: d rstd / d var = -rstd^3 / 2", LN_RECHECK)
mistake("layernorm-variance-term-without-gamma", LN, "(d_xhat * xhat).mean(axis=-1, keepdims=True))",
        "(d_out * xhat).mean(axis=-1, keepdims=True))",
        "every term of d_x starts from d_xhat = d_y gamma, the variance term too", LN_RECHECK)
mistake("rmsnorm-rms-path-sign", RMS, "d_x = rstd * (d_xhat - xhat", "d_x = rstd * (d_xhat + xhat",
        "the path through the rms subtracts: d rstd / d ms = -rstd^3 / 2", RMS_RECHECK)
mistake("rmsnorm-eps-outside-sqrt", RMS_FWD, "rstd = 1 / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + eps)",
        "rstd = 1 / (np.sqrt((x ** 2).mean(axis=-1, keepdims=True)) + eps)",
        "eps goes inside the root: 1 / sqrt(mean(x^2) + eps)", "y = gamma x / sqrt(mean(x^2) + eps)")
mistake("layernorm-variance-uncentred", "t08_norm.layernorm_forward", "var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
        "var = (x ** 2).mean(axis=-1, keepdims=True)",
        "the variance is the mean square of x - mean, not of x", "var = mean over d of (x - mean)^2")
mistake("linear-rows-reshaped-transposed", LIN, "x_rows = x.reshape(-1, x.shape[-1])", "x_rows = x.reshape(x.shape[-1], -1).T",
        "reshaping to [d_in, B*N] is not a transpose: keep each position's features together with "
        "reshape(-1, d_in)", LIN_RECHECK)
mistake("embeddings-norm-result-dropped", EMBS, "d_x = self.norm.backward(d_x, cache.norm)",
        "self.norm.backward(d_x, cache.norm)",
        "the norm's backward returns the gradient of its input: assign it, the tables need that one",
        "x = Norm(sum of the lookups): undo the norm first")
mistake("embedding-lookup-scaled", "t01_embedding.Embedding.forward", "return self.weight.data[ids], LookupCache(ids)",
        "return self.weight.data[ids] * np.sqrt(self.weight.shape[1]), LookupCache(ids)",
        "the lookup returns the table's rows as they are; a sqrt(d) factor is Embeddings' optional scale",
        "out[b, n] = E[ids[b, n]]")
mistake("swiglu-gate-sigmoid-derivative", GATE, "silu_backward(d_out * cache.value, cache.silu)",
        "d_out * cache.value * cache.silu.s",
        "SiLU's derivative is s (1 + g (1 - s)), the product rule of g s: sigmoid(g) alone is its first term",
        GATE_RECHECK)
mistake("layernorm-gamma-from-d-xhat", LN, "d_gamma = sum_over_positions(d_out * xhat)",
        "d_gamma = sum_over_positions(d_out * cache.gamma * xhat)",
        "d_gamma = sum of d_y xhat: d_xhat already holds gamma, which does not belong in gamma's own gradient",
        LN_RECHECK)
mistake("rmsnorm-rstd-derivative-power", RMS, "d_x = rstd * (d_xhat - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))",
        "d_x = rstd * d_xhat - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True) / rstd",
        "d rstd / d ms = -rstd^3 / 2 (the derivative of ms^(-1/2)): the power 3 is missing", RMS_RECHECK)
mistake("rmsnorm-module-gain-averaged", "t08_norm.RMSNorm.backward", "self.gamma.grad += d_gamma",
        "self.gamma.grad += d_gamma / np.prod(d_out.shape[:-1])",
        "every position used gamma: its gradient is the sum over positions, not their mean", "gamma.grad += d_gamma")
