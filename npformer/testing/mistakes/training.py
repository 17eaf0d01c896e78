"""Mistakes in the loss (t11_loss.py: log-softmax, cross-entropy) and the optimiser
(training/optim.py: AdamW)."""
from .registry import mistake

LOG = "t11_loss.log_softmax_backward"
LOG_RECHECK = "y = x - log sum e^x:  d_x = d_y - p * sum(d_y), p = e^y"
LOG_RETURN = "return d_out - cache.probs * np.sum(d_out, axis=cache.axis, keepdims=True)"
CE = "t11_loss.cross_entropy_backward"
CE_RECHECK = "d_logits = (softmax(logits) - onehot(target)) / count, 0 at ignored targets"
CEF = "t11_loss.cross_entropy_forward"
ADAM = "training.optim.adamw_update"
ADAM_RECHECK = ("m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  m_hat = m / (1 - b1^t);  "
                "v_hat = v / (1 - b2^t);  p -= lr (m_hat / (sqrt(v_hat) + eps) + wd p)")
LOG_FWD = "t11_loss.log_softmax_forward"
CEF_RECHECK = "loss = -(1/count) sum over counted targets of log p"

# -- log_softmax_backward ---------------------------------------------------------------------------
mistake("log-softmax-no-sum", LOG, LOG_RETURN, "return d_out - cache.probs",
        "the second term is p times the sum of d_y, not p alone", LOG_RECHECK)
mistake("log-softmax-as-softmax", LOG, LOG_RETURN,
        "return cache.probs * (d_out - np.sum(d_out * cache.probs, axis=cache.axis, keepdims=True))",
        "that is softmax's backward; log-softmax's is d_y - p sum(d_y)", LOG_RECHECK)
mistake("log-softmax-diagonal-only", LOG, LOG_RETURN, "return d_out - cache.probs * d_out",
        "each log-probability depends on every input through the log-sum-exp: the correction is "
        "p * sum_j d_y_j", LOG_RECHECK)
mistake("log-softmax-last-axis", LOG, LOG_RETURN, "return d_out - cache.probs * np.sum(d_out, axis=-1, keepdims=True)",
        "the sum runs over the axis the log-softmax normalised (cache.axis), not always the last one",
        LOG_RECHECK)
mistake("log-softmax-sum-weighted-by-p", LOG, LOG_RETURN,
        "return d_out - cache.probs * np.sum(d_out * cache.probs, axis=cache.axis, keepdims=True)",
        "the subtracted term is p times the sum of d_y alone (d_y * p is softmax's rule)", LOG_RECHECK)
mistake("log-softmax-sum-without-p", LOG, LOG_RETURN, "return d_out - np.sum(d_out, axis=cache.axis, keepdims=True)",
        "the subtracted sum is shared out in proportion to p: p * sum(d_y)", LOG_RECHECK)
mistake("log-softmax-sum-over-everything", LOG, LOG_RETURN, "return d_out - cache.probs * np.sum(d_out)",
        "the sum of d_y runs over each row (the softmax's axis), not over the whole array", LOG_RECHECK)

# -- cross_entropy_backward -------------------------------------------------------------------------
mistake("cross-entropy-no-one-hot", CE, "(cache.probs - one_hot)", "cache.probs",
        "the one-hot of the target is missing: d_logits = p - onehot(target)", CE_RECHECK)
mistake("cross-entropy-ignored-get-gradient", CE, "weight = cache.counted * (d_loss / max(cache.count, 1))",
        "weight = np.ones(cache.counted.shape) * (d_loss / max(cache.count, 1))",
        "ignored targets (IGNORE_INDEX) must get exactly zero gradient", CE_RECHECK)
mistake("cross-entropy-mean-over-all", CE, "(d_loss / max(cache.count, 1))", "(d_loss / cache.counted.size)",
        "the mean is over the counted targets only, not over every position", CE_RECHECK)
mistake("cross-entropy-d-loss-ignored", CE, "(d_loss / max(cache.count, 1))", "(1.0 / max(cache.count, 1))",
        "the upstream d_loss is dropped: everything is multiplied by it", CE_RECHECK)
mistake("cross-entropy-sign", CE, "(cache.probs - one_hot)", "(one_hot - cache.probs)",
        "the sign is flipped: d_logits = p - onehot, which lowers the target's loss", CE_RECHECK)
mistake("cross-entropy-no-mean", CE, "weight = cache.counted * (d_loss / max(cache.count, 1))",
        "weight = cache.counted * d_loss", "the loss is a mean over the counted targets: each gets 1/count of d_loss",
        CE_RECHECK)
mistake("cross-entropy-count-unguarded", CE, "d_loss / max(cache.count, 1)", "d_loss / cache.count",
        "when every target is ignored the count is 0: the loss and its gradient are 0, not 0/0",
        CE_RECHECK)
mistake("cross-entropy-one-hot-fancy-index", CE, "np.put_along_axis(one_hot, cache.targets[..., None], 1, axis=-1)",
        "one_hot[..., cache.targets] = 1",
        "one_hot[..., targets] puts a 1 at every target id in every row; each row needs one 1, at its own "
        "target (put_along_axis)", CE_RECHECK)

# -- log_softmax_forward ----------------------------------------------------------------------------
mistake("log-softmax-no-max-shift", "t11_loss.log_softmax_forward", "shifted = x - np.max(x, axis=axis, keepdims=True)",
        "shifted = x", "without subtracting the maximum, exp overflows for large logits",
        "log softmax(x) = x - max - log sum exp(x - max)")
mistake("log-softmax-adds-the-max-back", "t11_loss.log_softmax_forward", "y = shifted - log_total",
        "y = x - log_total", "log_total was computed from x - max: y = (x - max) - log_total",
        "log softmax(x) = x - max - log sum exp(x - max)")
mistake("log-softmax-lse-unshifted", LOG_FWD, "np.sum(np.exp(shifted), axis=axis, keepdims=True)",
        "np.sum(np.exp(x), axis=axis, keepdims=True)",
        "the log-sum-exp is subtracted from the shifted scores, so it must be of the shifted scores too",
        "y = (x - max) - log sum e^(x - max)")
mistake("log-softmax-log-of-softmax", LOG_FWD, "y = shifted - log_total",
        "y = np.log(np.exp(shifted) / np.exp(log_total))",
        "log(softmax) underflows to log(0) = -inf for very negative scores: subtract the log-sum instead",
        "log softmax(x) = x - max - log sum exp(x - max)")
mistake("log-softmax-caches-unnormalised", LOG_FWD, "LogSoftmaxCache(np.exp(y), axis)",
        "LogSoftmaxCache(np.exp(shifted), axis)",
        "the backward needs the probabilities e^y; e^(x - max) is not normalised",
        "log softmax(x) = x - max - log sum exp(x - max)")

# -- cross_entropy_forward --------------------------------------------------------------------------
mistake("cross-entropy-forward-counts-ignored", CEF, "loss = -np.sum(picked * counted) / max(count, 1)",
        "loss = -np.sum(picked * counted) / counted.size",
        "the mean is over the counted targets only", CEF_RECHECK)
mistake("cross-entropy-forward-sums-ignored", CEF, "loss = -np.sum(picked * counted) / max(count, 1)",
        "loss = -np.sum(picked) / max(count, 1)", "ignored targets must not add to the loss",
        CEF_RECHECK)
mistake("cross-entropy-indexes-raw-targets", CEF, "safe[..., None], axis=-1)", "targets[..., None], axis=-1)",
        "an ignored target (-100) must not be used as an index: pick with the targets where ignored ones "
        "are replaced, then drop them", "loss = -mean over counted targets of log p(target)")
mistake("cross-entropy-forward-sign", CEF, "loss = -np.sum(picked * counted) / max(count, 1)",
        "loss = np.sum(picked * counted) / max(count, 1)",
        "the loss is minus the mean log-probability of the targets (log p <= 0, the loss >= 0)",
        CEF_RECHECK)
mistake("cross-entropy-forward-no-mean", CEF, "loss = -np.sum(picked * counted) / max(count, 1)",
        "loss = -np.sum(picked * counted)", "the loss is the mean over the counted targets, not their sum",
        CEF_RECHECK)

# -- optim.adamw_update -----------------------------------------------------------------------------
mistake("adamw-no-bias-correction", ADAM, "m_hat = m / (1 - b1 ** step)", "m_hat = m",
        "m_hat and v_hat undo the moments' start at 0: divide by 1 - b^t (here m_hat)", ADAM_RECHECK)
mistake("adamw-step-off-by-one", ADAM, "m_hat = m / (1 - b1 ** step)", "m_hat = m / (1 - b1 ** (step + 1))",
        "the bias correction uses the step t = 1, 2, ... as given, not t + 1", ADAM_RECHECK)
mistake("adamw-decay-without-lr", ADAM, "data = data - lr * weight_decay * data", "data = data - weight_decay * data",
        "the decoupled decay is multiplied by the learning rate: p -= lr wd p", ADAM_RECHECK)
mistake("adamw-no-decay", ADAM, "data = data - lr * weight_decay * data", "data = data",
        "the weight decay is never applied", ADAM_RECHECK)
mistake("adamw-eps-inside-sqrt", ADAM, "np.sqrt(v_hat) + eps", "np.sqrt(v_hat + eps)",
        "eps is added after the square root: sqrt(v_hat) + eps", ADAM_RECHECK)
mistake("adamw-first-moment-weights", ADAM, "m = b1 * m + (1 - b1) * grad", "m = b1 * m + b1 * grad",
        "the new gradient enters the running mean with weight 1 - b1", ADAM_RECHECK)
mistake("adamw-no-bias-correction-either", ADAM, ("m_hat = m / (1 - b1 ** step)", "v_hat = v / (1 - b2 ** step)"),
        ("m_hat = m", "v_hat = v"), "without bias correction the first steps are far too small: m and v start "
        "at 0 and are divided by 1 - b^t", ADAM_RECHECK)
mistake("adamw-steps-off-by-one", ADAM, ("m_hat = m / (1 - b1 ** step)", "v_hat = v / (1 - b2 ** step)"),
        ("m_hat = m / (1 - b1 ** (step + 1))", "v_hat = v / (1 - b2 ** (step + 1))"),
        "the step already counts from 1: step + 1 under-corrects the bias", ADAM_RECHECK)
mistake("adamw-decay-coupled", ADAM, ("m = b1 * m + (1 - b1) * grad", "data = data - lr * weight_decay * data"),
        ("grad = grad + weight_decay * data\n    m = b1 * m + (1 - b1) * grad", "data = data"),
        "that is Adam with an L2 penalty in the gradient; AdamW's decay is decoupled: p -= lr wd p", ADAM_RECHECK)
mistake("adamw-v-corrected-with-b1", ADAM, "v_hat = v / (1 - b2 ** step)", "v_hat = v / (1 - b1 ** step)",
        "v's bias correction uses b2: v_hat = v / (1 - b2^t)", ADAM_RECHECK)
mistake("adamw-m-weights-swapped", ADAM, "m = b1 * m + (1 - b1) * grad", "m = (1 - b1) * m + b1 * grad",
        "the running mean keeps b1 of the old m and adds (1 - b1) of the new gradient", ADAM_RECHECK)
mistake("adamw-correction-precedence", ADAM, "m_hat = m / (1 - b1 ** step)", "m_hat = m / (1 - b1) ** step",
        "the correction is 1 - b1^t (b1 to the power t), not (1 - b1)^t", ADAM_RECHECK)
mistake("adamw-decay-after-the-step", ADAM,
        ("data = data - lr * weight_decay * data", "data = data - lr * m_hat / (np.sqrt(v_hat) + eps)"),
        ("data = data", "data = data - lr * m_hat / (np.sqrt(v_hat) + eps)\n    data = data - lr * weight_decay * data"),
        "decay the parameter as it was before this step: p -= lr (update + wd p)", ADAM_RECHECK)
mistake("adamw-betas-swapped", ADAM, ("m = b1 * m + (1 - b1) * grad", "v = b2 * v + (1 - b2) * grad * grad"),
        ("m = b2 * m + (1 - b2) * grad", "v = b1 * v + (1 - b1) * grad * grad"),
        "b1 (0.9) averages the gradient and b2 (0.999) its square", ADAM_RECHECK)
mistake("adamw-stores-corrected-moments", ADAM, ("m_hat = m / (1 - b1 ** step)", "v_hat = v / (1 - b2 ** step)"),
        ("m = m / (1 - b1 ** step)", "v = v / (1 - b2 ** step)\n    m_hat, v_hat = m, v"),
        "keep the running moments uncorrected: return m and v as they are, use the corrected copies only "
        "for the step", ADAM_RECHECK)
mistake("adamw-second-moment-beta1", ADAM, "v = b2 * v + (1 - b2) * grad * grad", "v = b2 * v + (1 - b1) * grad * grad",
        "the second moment's new share is (1 - b2) g^2: b1 belongs to the first moment", ADAM_RECHECK)
mistake("adamw-decay-normalised", ADAM, ("data = data - lr * weight_decay * data", "lr * m_hat / (np.sqrt(v_hat) + eps)"),
        ("data = data", "lr * (m_hat + weight_decay * data) / (np.sqrt(v_hat) + eps)"),
        "decoupled decay is lr * wd * p, outside Adam's normalisation; dividing it by sqrt(v_hat) is "
        "Adam's L2, not AdamW", ADAM_RECHECK)
mistake("adamw-v-not-corrected", ADAM, "v_hat = v / (1 - b2 ** step)", "v_hat = v",
        "v starts at 0 as well: divide it by 1 - b2^t too", ADAM_RECHECK)
mistake("adamw-no-sqrt", ADAM, "np.sqrt(v_hat) + eps", "v_hat + eps",
        "the step divides by the root of the second moment, sqrt(v_hat) + eps", ADAM_RECHECK)
