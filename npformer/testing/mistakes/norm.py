"""Mistakes in the norms (t08_norm.py): LayerNorm and RMSNorm, their paths through the mean and
the variance, their gains."""
from .registry import mistake

LN = "t08_norm.layernorm_backward"
LN_RECHECK = "d_x = rstd (d_xhat - mean(d_xhat) - xhat mean(d_xhat xhat)), d_xhat = d_y gamma, means over d"
MEAN_TERM = " - d_xhat.mean(axis=-1, keepdims=True)"
VAR_TERM = "\n                  - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))"
RMS = "t08_norm.rmsnorm_backward"
RMS_RECHECK = "d_x = rstd (d_xhat - xhat mean(d_xhat xhat)), d_xhat = d_y gamma, the mean over d"
RMS_FWD = "t08_norm.rmsnorm_forward"

# -- layernorm_backward -----------------------------------------------------------------------------
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
mistake("layernorm-means-over-axis-0", LN, (MEAN_TERM, "(d_xhat * xhat).mean(axis=-1, keepdims=True))"),
        (" - d_xhat.mean(axis=0, keepdims=True)", "(d_xhat * xhat).mean(axis=0, keepdims=True))"),
        "the backward's means run over the d features of each position (axis -1), like the forward's",
        LN_RECHECK)
mistake("layernorm-divides-by-rstd", LN, "d_x = rstd * (", "d_x = 1 / rstd * (",
        "rstd is already 1 / sqrt(var + eps): the bracket is multiplied by it", LN_RECHECK)
mistake("layernorm-gamma-without-xhat", LN, "d_gamma = sum_over_positions(d_out * xhat)",
        "d_gamma = sum_over_positions(d_out)", "gamma multiplies xhat: d_gamma sums d_y xhat, not d_y",
        "d_gamma = sum over positions of d_y xhat")
mistake("layernorm-sums-not-means", LN, ("d_xhat.mean(axis=-1", "(d_xhat * xhat).mean(axis=-1"),
        ("d_xhat.sum(axis=-1", "(d_xhat * xhat).sum(axis=-1"),
        "the two correction terms are means over the d features (they carry 1/d), not sums", LN_RECHECK)
mistake("layernorm-gamma-sum-first-two-axes", LN, "d_gamma = sum_over_positions(d_out * xhat)",
        "d_gamma = (d_out * xhat).sum(axis=(0, 1))",
        "d_gamma sums over every axis but the features, whatever the input's rank ([N, d], [B, N, d]...)",
        LN_RECHECK)
mistake("layernorm-variance-path-halved", LN, "- xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))",
        "- 0.5 * xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))",
        "the variance path lost a factor 2: d(x - mean)^2 / dx = 2 (x - mean), which cancels the -1/2 of "
        "var^(-1/2)", LN_RECHECK)
mistake("layernorm-mean-path-sign", LN, " - d_xhat.mean(axis=-1, keepdims=True)", " + d_xhat.mean(axis=-1, keepdims=True)",
        "the path through the mean subtracts: the mean moves with every x_j", LN_RECHECK)
mistake("layernorm-variance-path-sign", LN, "\n                  - xhat * (d_xhat * xhat)",
        "\n                  + xhat * (d_xhat * xhat)",
        "the path through the variance subtracts: d rstd / d var = -rstd^3 / 2", LN_RECHECK)
mistake("layernorm-variance-term-without-gamma", LN, "(d_xhat * xhat).mean(axis=-1, keepdims=True))",
        "(d_out * xhat).mean(axis=-1, keepdims=True))",
        "every term of d_x starts from d_xhat = d_y gamma, the variance term too", LN_RECHECK)
mistake("layernorm-gamma-from-d-xhat", LN, "d_gamma = sum_over_positions(d_out * xhat)",
        "d_gamma = sum_over_positions(d_out * cache.gamma * xhat)",
        "d_gamma = sum of d_y xhat: d_xhat already holds gamma, which does not belong in gamma's own gradient",
        LN_RECHECK)

# -- rmsnorm_backward -------------------------------------------------------------------------------
mistake("rmsnorm-no-rms-path", RMS, " - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))", ")",
        "the path through the rms is missing: - xhat mean(d_xhat xhat)", RMS_RECHECK)
mistake("rmsnorm-gamma-forgotten", RMS, "d_xhat = d_out * cache.gamma", "d_xhat = d_out",
        "y = gamma xhat: d_xhat is d_y times gamma", RMS_RECHECK)
mistake("rmsnorm-rstd-forgotten", RMS, "d_x = rstd * (", "d_x = (",
        "the whole bracket is multiplied by rstd = 1 / rms", RMS_RECHECK)
mistake("rmsnorm-sum-not-mean", RMS, "(d_xhat * xhat).mean(axis=-1", "(d_xhat * xhat).sum(axis=-1",
        "the rms is a mean over the d features: its term carries a 1/d (mean, not sum)", RMS_RECHECK)
mistake("rmsnorm-with-a-mean-term", RMS, "d_x = rstd * (d_xhat - xhat",
        "d_x = rstd * (d_xhat - d_xhat.mean(axis=-1, keepdims=True) - xhat",
        "RMSNorm does not centre: its backward has no - mean(d_xhat) term (that is LayerNorm's backward, "
        "written or called here)", RMS_RECHECK)
mistake("rmsnorm-backward-rstd-on-first-term", RMS,
        "d_x = rstd * (d_xhat - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))",
        "d_x = rstd * d_xhat - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True)",
        "brackets: rstd multiplies the correction term too, rstd (d_xhat - xhat mean(d_xhat xhat))", RMS_RECHECK)
mistake("rmsnorm-rms-path-halved", RMS, "d_x = rstd * (d_xhat - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))",
        "d_x = rstd * (d_xhat - 0.5 * xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))",
        "the path through the rms lost a factor 2: d(x^2)/dx = 2x, which cancels the -1/2 of ms^(-1/2)",
        RMS_RECHECK)
mistake("rmsnorm-rms-path-sign", RMS, "d_x = rstd * (d_xhat - xhat", "d_x = rstd * (d_xhat + xhat",
        "the path through the rms subtracts: d rstd / d ms = -rstd^3 / 2", RMS_RECHECK)
mistake("rmsnorm-rstd-derivative-power", RMS, "d_x = rstd * (d_xhat - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))",
        "d_x = rstd * d_xhat - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True) / rstd",
        "d rstd / d ms = -rstd^3 / 2 (the derivative of ms^(-1/2)): the power 3 is missing", RMS_RECHECK)

# -- LayerNorm.backward -----------------------------------------------------------------------------
mistake("layernorm-gamma-assigned", "t08_norm.LayerNorm.backward", "self.gamma.grad += d_gamma",
        "self.gamma.grad = d_gamma", "gamma.grad is assigned, not accumulated (+=)", "gamma.grad += d_gamma")
mistake("layernorm-module-assigns-both", "t08_norm.LayerNorm.backward",
        ("self.gamma.grad += d_gamma", "self.beta.grad += d_beta"),
        ("self.gamma.grad = d_gamma", "self.beta.grad = d_beta"),
        "gamma.grad and beta.grad are assigned, not accumulated (+=)", "gamma.grad += d_gamma; beta.grad += d_beta")
mistake("layernorm-module-gamma-beta-swapped", "t08_norm.LayerNorm.backward",
        "d_x, d_gamma, d_beta = layernorm_backward(d_out, cache)", "d_x, d_beta, d_gamma = layernorm_backward(d_out, cache)",
        "layernorm_backward returns (d_x, d_gamma, d_beta): the gain's and the shift's gradients are swapped",
        "gamma.grad += d_gamma; beta.grad += d_beta")
mistake("layernorm-module-beta-assigned", "t08_norm.LayerNorm.backward", "self.beta.grad += d_beta",
        "self.beta.grad = d_beta", "beta.grad is assigned, not accumulated (+=)", "beta.grad += d_beta")
mistake("layernorm-beta-gets-gamma-gradient", "t08_norm.LayerNorm.backward", "self.beta.grad += d_beta",
        "self.beta.grad += d_gamma", "beta's gradient is d_out summed over the positions (d_beta), not gamma's",
        "d_gamma = sum d_y xhat;  d_beta = sum d_y")

# -- RMSNorm.backward -------------------------------------------------------------------------------
mistake("rmsnorm-gamma-assigned", "t08_norm.RMSNorm.backward", "self.gamma.grad += d_gamma",
        "self.gamma.grad = d_gamma", "gamma.grad is assigned, not accumulated (+=)", "gamma.grad += d_gamma")
mistake("rmsnorm-module-gain-never-added", "t08_norm.RMSNorm.backward", "self.gamma.grad += d_gamma", "pass",
        "d_gamma is computed but never added into gamma.grad", "gamma.grad += d_gamma")
mistake("rmsnorm-module-gain-averaged", "t08_norm.RMSNorm.backward", "self.gamma.grad += d_gamma",
        "self.gamma.grad += d_gamma / np.prod(d_out.shape[:-1])",
        "every position used gamma: its gradient is the sum over positions, not their mean", "gamma.grad += d_gamma")

# -- layernorm_forward ------------------------------------------------------------------------------
mistake("layernorm-eps-outside-sqrt", "t08_norm.layernorm_forward", "rstd = 1 / np.sqrt(var + eps)",
        "rstd = 1 / (np.sqrt(var) + eps)", "eps goes inside the square root: sqrt(var + eps)",
        "xhat = (x - mean) / sqrt(var + eps)")
mistake("layernorm-unbiased-variance", "t08_norm.layernorm_forward",
        "var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
        "var = ((x - mean) ** 2).sum(axis=-1, keepdims=True) / (x.shape[-1] - 1)",
        "LayerNorm uses the biased variance (divide by d), not the unbiased one (d - 1)",
        "var = mean over d of (x - mean)^2")
mistake("layernorm-forward-over-axis-0", "t08_norm.layernorm_forward",
        ("mean = x.mean(axis=-1, keepdims=True)", "var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)"),
        ("mean = x.mean(axis=0, keepdims=True)", "var = ((x - mean) ** 2).mean(axis=0, keepdims=True)"),
        "LayerNorm normalises each position over its d features (axis -1), not over the batch",
        "mean and var over the last axis")
mistake("layernorm-forward-mean-over-axis-0", "t08_norm.layernorm_forward", "mean = x.mean(axis=-1, keepdims=True)",
        "mean = x.mean(axis=0, keepdims=True)",
        "the mean is over each position's d features (axis -1), not over the batch", "mean over the last axis")
mistake("layernorm-variance-uncentred", "t08_norm.layernorm_forward", "var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
        "var = (x ** 2).mean(axis=-1, keepdims=True)",
        "the variance is the mean square of x - mean, not of x", "var = mean over d of (x - mean)^2")

# -- rmsnorm_forward --------------------------------------------------------------------------------
mistake("rmsnorm-sum-of-squares", "t08_norm.rmsnorm_forward", "(x ** 2).mean(axis=-1, keepdims=True)",
        "(x ** 2).sum(axis=-1, keepdims=True)", "the rms is the root of the mean of the squares, not of their sum",
        "xhat = x / sqrt(mean(x^2) + eps)")
mistake("rmsnorm-forward-variance", "t08_norm.rmsnorm_forward", "(x ** 2).mean(axis=-1, keepdims=True)",
        "x.var(axis=-1, keepdims=True)", "RMSNorm divides by the root mean square, not the standard deviation",
        "xhat = x / sqrt(mean(x^2) + eps)")
mistake("rmsnorm-forward-no-root", RMS_FWD, "rstd = 1 / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + eps)",
        "rstd = 1 / ((x ** 2).mean(axis=-1, keepdims=True) + eps)",
        "x is divided by the root of the mean square, not by the mean square itself",
        "rms(x) = sqrt(mean(x^2) + eps)")
mistake("rmsnorm-eps-outside-sqrt", RMS_FWD, "rstd = 1 / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + eps)",
        "rstd = 1 / (np.sqrt((x ** 2).mean(axis=-1, keepdims=True)) + eps)",
        "eps goes inside the root: 1 / sqrt(mean(x^2) + eps)", "y = gamma x / sqrt(mean(x^2) + eps)")
