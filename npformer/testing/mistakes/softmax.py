"""Mistakes in softmax (t03_softmax.py): the Jacobian's two terms, the axis, the mask."""
from .registry import mistake

BACKWARD = "t03_softmax.softmax_backward"
FORWARD = "t03_softmax.softmax_forward"
RECHECK = "d_x = y * (d_y - sum_j d_y_j y_j), the sum over the softmax's own axis"
SUM = "np.sum(d_out * y, axis=cache.axis, keepdims=True)"
FWD_RECHECK = "a_j = e^(s_j - max s) / sum_k e^(s_k - max s): the max and the sum per row"
FORWARD_RECHECK = "scores where the mask is False become -inf before the exponential"

# -- softmax_backward -------------------------------------------------------------------------------
mistake("softmax-diagonal-only", BACKWARD, f"return y * (d_out - {SUM})", "return y * (1 - y) * d_out",
        "only the diagonal of the softmax Jacobian: each weight also depends on every other score "
        "of its row, which the sum term carries", RECHECK)
mistake("softmax-no-sum-term", BACKWARD, f"return y * (d_out - {SUM})", "return y * d_out",
        "the sum term is missing: each weight depends on every score of its row, so d_x_i also "
        "subtracts y_i sum_j d_y_j y_j", RECHECK)
mistake("softmax-sum-over-axis-0", BACKWARD, SUM, "np.sum(d_out * y, axis=0, keepdims=True)",
        "the sum runs over axis 0, not over the axis the softmax normalised (cache.axis)", RECHECK)
mistake("softmax-no-outer-y", BACKWARD, f"return y * (d_out - {SUM})", f"return d_out - {SUM}",
        "the factor y_i in front is missing: d_x_i = y_i (d_y_i - sum_j d_y_j y_j)", RECHECK)
mistake("softmax-sum-sign", BACKWARD, f"return y * (d_out - {SUM})", f"return y * (d_out + {SUM})",
        "the sum term is added instead of subtracted", RECHECK)
mistake("softmax-unweighted-sum", BACKWARD, SUM, "np.sum(d_out, axis=cache.axis, keepdims=True)",
        "the sum must weight each d_y_j by its y_j", RECHECK)
mistake("softmax-passed-through", BACKWARD, f"return y * (d_out - {SUM})", "return d_out",
        "the gradient is passed through unchanged: the softmax's own derivative is left out", RECHECK)
mistake("softmax-sum-over-last-axis", BACKWARD, SUM, "np.sum(d_out * y, axis=-1, keepdims=True)",
        "the axis is hard-coded as the last one; the sum runs over the axis the softmax normalised "
        "(cache.axis)", RECHECK)
mistake("softmax-sum-over-everything", BACKWARD, SUM, "np.sum(d_out * y)",
        "the sum runs over the whole array, mixing rows; it runs over each row (the softmax's axis)",
        RECHECK)
mistake("softmax-mean-not-sum", BACKWARD, SUM, "np.mean(d_out * y, axis=cache.axis, keepdims=True)",
        "the row term is the sum of d_y_j y_j, not its mean", RECHECK)
mistake("softmax-sign-flipped", BACKWARD, f"return y * (d_out - {SUM})", f"return y * ({SUM} - d_out)",
        "the whole gradient has the wrong sign: y (d_y - sum), not y (sum - d_y)", RECHECK)
mistake("softmax-log-softmax-backward", BACKWARD, f"return y * (d_out - {SUM})",
        "return d_out - y * np.sum(d_out, axis=cache.axis, keepdims=True)",
        "that is log-softmax's backward; softmax's multiplies by y and weights each d_y_j by y_j: "
        "y (d_y - sum_j d_y_j y_j)", RECHECK)
mistake("softmax-sum-term-without-y", BACKWARD, f"return y * (d_out - {SUM})", f"return y * d_out - {SUM}",
        "the sum term needs the factor y_i too: d_x_i = y_i d_y_i - y_i sum_j d_y_j y_j", RECHECK)

# -- softmax_forward --------------------------------------------------------------------------------
mistake("softmax-mask-ignored", FORWARD, "x = np.where(mask, x, -np.inf)", "x = x",
        "the mask is not applied: a masked score must get weight exactly 0",
        FORWARD_RECHECK)
mistake("softmax-mask-to-zero", FORWARD, "x = np.where(mask, x, -np.inf)", "x = np.where(mask, x, 0)",
        "masked scores are set to 0, which still gets weight e^0 / sum; they must be -inf",
        FORWARD_RECHECK)
mistake("softmax-finite-mask-fill", FORWARD, "x = np.where(mask, x, -np.inf)", "x = np.where(mask, x, -1e9)",
        "masked scores are set to a large finite number (-1e9): a row with nothing to read then "
        "gets equal weights, the average of the values, instead of zeros",
        FORWARD_RECHECK)
mistake("softmax-normalised-over-axis-0", FORWARD, "total = np.sum(e, axis=axis, keepdims=True)",
        "total = np.sum(e, axis=0, keepdims=True)",
        "the exponentials are divided by a sum over axis 0, not over the softmax's axis",
        "a_j = e^(s_j - max s) / sum_k e^(s_k - max s), the sums over ``axis``")
mistake("softmax-global-max", FORWARD, "peak = np.max(x, axis=axis, keepdims=True)", "peak = np.max(x)",
        "the maximum is taken over the whole array, not each row: a row far below it underflows to zeros",
        FWD_RECHECK)
mistake("softmax-no-max-shift", FORWARD, "e = np.exp(x - peak)", "e = np.exp(x)",
        "without subtracting each row's maximum, exp overflows for large scores (inf / inf = NaN)",
        FWD_RECHECK)
mistake("softmax-fully-masked-nan", FORWARD, "y = e / np.where(total > 0, total, 1)", "y = e / total",
        "a fully masked row has total 0: dividing by it gives 0/0 = NaN; such a row stays all zeros",
        FWD_RECHECK)
mistake("softmax-normalised-over-last-axis", FORWARD, "total = np.sum(e, axis=axis, keepdims=True)",
        "total = np.sum(e, axis=-1, keepdims=True)",
        "the exponentials are divided by a sum over the last axis whatever axis was asked for",
        FWD_RECHECK)
