"""Mistakes in the linear layer (t02_linear.py): its three gradients and the .grad it adds into."""
from .registry import mistake

LIN = "t02_linear.linear_backward"
LIN_RECHECK = "d_x = d_y W^T;  d_W = sum over positions of x^T d_y;  d_b = sum over positions of d_y"

# -- linear_backward --------------------------------------------------------------------------------
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
mistake("linear-dx-not-transposed", LIN, "d_x = d_out @ weight.T", "d_x = d_out @ weight",
        "d_x = d_y W^T: W is [d_in, d_out], so it comes back transposed", LIN_RECHECK)
mistake("linear-rows-reshaped-transposed", LIN, "x_rows = x.reshape(-1, x.shape[-1])", "x_rows = x.reshape(x.shape[-1], -1).T",
        "reshaping to [d_in, B*N] is not a transpose: keep each position's features together with "
        "reshape(-1, d_in)", LIN_RECHECK)

# -- Linear.backward --------------------------------------------------------------------------------
mistake("linear-weight-assigned", "t02_linear.Linear.backward", "self.weight.grad += d_weight",
        "self.weight.grad = d_weight", "weight.grad is assigned, not accumulated: a layer used twice "
        "must receive both gradients (+=)", "weight.grad += d_W")
mistake("linear-bias-assigned", "t02_linear.Linear.backward", "self.bias.grad += d_bias",
        "self.bias.grad = d_bias", "bias.grad is assigned, not accumulated (+=)", "bias.grad += d_b")
mistake("linear-bias-never-added", "t02_linear.Linear.backward", "self.bias.grad += d_bias", "pass",
        "the bias gradient is computed but never added into bias.grad", "bias.grad += d_b")
mistake("linear-weight-subtracted", "t02_linear.Linear.backward", "self.weight.grad += d_weight",
        "self.weight.grad -= d_weight", "backward adds the gradient into .grad; subtracting it is the "
        "optimiser's step, taken later", "weight.grad += d_W")

# -- linear_forward ---------------------------------------------------------------------------------
mistake("linear-forward-no-bias", "t02_linear.linear_forward", "y = y + bias", "y = y",
        "the bias is never added", "y = x W + b")
mistake("linear-forward-scaled", "t02_linear.linear_forward", "y = x @ weight", "y = x @ weight / np.sqrt(x.shape[-1])",
        "a linear layer is x W + b: the 1/sqrt(d) belongs to the initialisation (or to attention's "
        "scores), not to the forward", "y = x W + b")
