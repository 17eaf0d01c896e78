"""Mistakes in the blocks (t09_block.py), the decoder (t10_model.py), the loss (t11_loss.py), the
optimizer (training/optim.py), MoE (t14_moe.py), the encoder (t15_encoder.py) and the
encoder-decoder (t16_cross_attention.py, t17_seq2seq.py)."""
from .registry import mistake

PRE = "t09_block.PreNormBlock.backward"
PRE_RECHECK = "h = x + Attn(Norm1(x)), y = h + FFN(Norm2(h)): each residual passes its gradient on unchanged"
mistake("prenorm-second-residual-dropped", PRE, "d_h = d_out + self.norm2.backward(d_f, cache.norm2)",
        "d_h = self.norm2.backward(d_f, cache.norm2)",
        "y = h + FFN(...): the residual carries d_y to h unchanged, plus the FFN path", PRE_RECHECK)
mistake("prenorm-first-residual-dropped", PRE, "return d_h + self.norm1.backward(d_a, cache.norm1)",
        "return self.norm1.backward(d_a, cache.norm1)",
        "h = x + Attn(...): the residual carries d_h to x unchanged, plus the attention path", PRE_RECHECK)
mistake("prenorm-norm2-skipped", PRE, "d_h = d_out + self.norm2.backward(d_f, cache.norm2)", "d_h = d_out + d_f",
        "the FFN read Norm2(h): its gradient goes back through Norm2", PRE_RECHECK)
mistake("prenorm-norm1-skipped", PRE, "return d_h + self.norm1.backward(d_a, cache.norm1)", "return d_h + d_a",
        "the attention read Norm1(x): its gradient goes back through Norm1", PRE_RECHECK)
POST = "t09_block.PostNormBlock.backward"
POST_RECHECK = "h = Norm1(x + Attn(x)), y = Norm2(h + FFN(h)): each residual passes its gradient on"
mistake("postnorm-ffn-residual-dropped", POST, "d_h = d_sum2 + self.ffn.backward(", "d_h = self.ffn.backward(",
        "y = Norm2(h + FFN(h)): h receives d_sum2 directly as well as through the FFN", POST_RECHECK)
mistake("postnorm-attention-residual-dropped", POST, "return d_sum1 + self.attn.backward(d_sum1, cache.attn)",
        "return self.attn.backward(d_sum1, cache.attn)",
        "h = Norm1(x + Attn(x)): x receives d_sum1 directly as well as through the attention", POST_RECHECK)
HEAD = "t10_model.TiedHead.backward"
mistake("tied-head-assigned", HEAD, "self.weight.grad += d_weight_t.T", "self.weight.grad = d_weight_t.T",
        "the token table is used twice (lookup and head): the head must add its share, not replace it",
        "d_E += (x^T d_logits)^T")
LM = "t10_model.DecoderLM.backward"
LM_RECHECK = "undo in reverse: head, final norm, the blocks from the last to the first, the embeddings"
mistake("decoder-final-norm-skipped", LM, "d_x = self.norm.backward(d_h, cache.norm)", "d_x = d_h",
        "the head read the final norm's output: go back through the final norm", LM_RECHECK)
mistake("decoder-blocks-in-forward-order", LM, "for i in reversed(range(len(self.blocks))):",
        "for i in range(len(self.blocks)):", "the blocks are undone last first", LM_RECHECK)
mistake("decoder-embeddings-skipped", LM, "return self.embed.backward(d_x, cache.embed)", "return None",
        "the embeddings (token and position tables) receive no gradient", LM_RECHECK)

# -- the loss -----------------------------------------------------------------------------------------
LOG = "t11_loss.log_softmax_backward"
LOG_RECHECK = "y = x - log sum e^x:  d_x = d_y - p * sum(d_y), p = e^y"
LOG_RETURN = "return d_out - cache.probs * np.sum(d_out, axis=cache.axis, keepdims=True)"
mistake("log-softmax-no-sum", LOG, LOG_RETURN, "return d_out - cache.probs",
        "the second term is p times the sum of d_y, not p alone", LOG_RECHECK)
mistake("log-softmax-as-softmax", LOG, LOG_RETURN,
        "return cache.probs * (d_out - np.sum(d_out * cache.probs, axis=cache.axis, keepdims=True))",
        "that is softmax's backward; log-softmax's is d_y - p sum(d_y)", LOG_RECHECK)
CE = "t11_loss.cross_entropy_backward"
CE_RECHECK = "d_logits = (softmax(logits) - onehot(target)) / count, 0 at ignored targets"
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
CEF = "t11_loss.cross_entropy_forward"
mistake("cross-entropy-forward-counts-ignored", CEF, "loss = -np.sum(picked * counted) / max(count, 1)",
        "loss = -np.sum(picked * counted) / counted.size",
        "the mean is over the counted targets only", "loss = -(1/count) sum over counted targets of log p")
mistake("cross-entropy-forward-sums-ignored", CEF, "loss = -np.sum(picked * counted) / max(count, 1)",
        "loss = -np.sum(picked) / max(count, 1)", "ignored targets must not add to the loss",
        "loss = -(1/count) sum over counted targets of log p")

# -- AdamW --------------------------------------------------------------------------------------------
ADAM = "training.optim.adamw_update"
ADAM_RECHECK = ("m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  m_hat = m / (1 - b1^t);  "
                "v_hat = v / (1 - b2^t);  p -= lr (m_hat / (sqrt(v_hat) + eps) + wd p)")
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

# -- MoE ----------------------------------------------------------------------------------------------
MOE = "t14_moe.MoE.backward"
MOE_RECHECK = "y = sum over the k chosen experts of weight_e FFN_e(x); weights = renormalised router softmax"
mistake("moe-router-input-dropped", MOE, "d_flat += self.router.backward(d_logits, cache.router)",
        "self.router.backward(d_logits, cache.router)",
        "x also fed the router: add the router's input gradient into d_x", MOE_RECHECK)
mistake("moe-expert-gradient-unweighted", MOE, "expert.backward(weights[rows, slots, None] * d_y[rows], call.expert)",
        "expert.backward(d_y[rows], call.expert)",
        "each expert's output was scaled by its routing weight: so is the gradient it receives",
        MOE_RECHECK)
mistake("moe-renormalisation-skipped", MOE,
        "d_kept = (d_weights - np.sum(d_weights * weights, axis=-1, keepdims=True)) / cache.kept_total",
        "d_kept = d_weights", "the top-k weights were renormalised to sum to 1: that step has a backward too",
        MOE_RECHECK)

# -- the encoder --------------------------------------------------------------------------------------
POOL = "t15_encoder.mean_pool_backward"
mistake("mean-pool-counts-padding", POOL, "return cache.weights[:, :, None] * d_pooled[:, None, :]",
        "return d_pooled[:, None, :] / cache.weights.shape[1] * np.ones(cache.weights.shape)[:, :, None]",
        "the mean is over the real tokens only: padding gets 0, the rest 1/count",
        "d_states[b, n] = m_bn d_pooled[b] / sum_n m_bn")
mistake("mean-pool-no-count", POOL, "return cache.weights[:, :, None] * d_pooled[:, None, :]",
        "return (cache.weights > 0)[:, :, None] * d_pooled[:, None, :]",
        "the 1/count of the mean is missing", "d_states[b, n] = m_bn d_pooled[b] / sum_n m_bn")
L2 = "t15_encoder.l2_normalize_backward"
mistake("l2-normalize-no-projection", L2, "across = d_out - y * np.sum(y * d_out, axis=-1, keepdims=True)",
        "across = d_out", "only the part of d_out across the sphere survives: subtract y (y . d_out)",
        "d_x = (d_out - y (y . d_out)) / |x|")
mistake("l2-normalize-no-length", L2, "return np.where(cache.clamped, d_out, across) / length",
        "return np.where(cache.clamped, d_out, across)", "the result is divided by |x|",
        "d_x = (d_out - y (y . d_out)) / |x|")
ENC = "t15_encoder.Encoder.backward"
mistake("encoder-blocks-in-forward-order", ENC, "zip(reversed(self.blocks), reversed(cache.blocks))",
        "zip(self.blocks, cache.blocks)", "the blocks are undone last first",
        "undo in reverse: final norm, the blocks from the last to the first, the embeddings")
mistake("encoder-final-norm-skipped", ENC, "d_x = self.final_norm.backward(d_x, cache.final_norm)", "d_x = d_x",
        "the output went through the final norm: go back through it first",
        "undo in reverse: final norm, the blocks from the last to the first, the embeddings")

# -- the encoder-decoder --------------------------------------------------------------------------------
CROSS = "t16_cross_attention.CrossAttention.backward"
mistake("cross-attention-k-and-v-swapped", CROSS, "np.concatenate([d_k, d_v], axis=1)",
        "np.concatenate([d_v, d_k], axis=1)", "the memory's projection is [Wk | Wv]: its gradient in that order",
        "d_memory = [d_k | d_v] [Wk | Wv]^T")
mistake("cross-attention-wo-skipped", CROSS, "d_merged = self.out.backward(d_out, cache.out)", "d_merged = d_out",
        "the output projection Wo has a backward too", "undo in reverse: Wo, merge heads, attention, Wq and Wkv")
BLOCK = "t17_seq2seq.EncoderDecoderBlock.backward"
mistake("decoder-block-cross-residual-dropped", BLOCK,
        "d_h = d_g + self.cross_norm.backward(d_c, cache.cross_norm)",
        "d_h = self.cross_norm.backward(d_c, cache.cross_norm)",
        "g = h + Cross(...): the residual carries d_g to h unchanged, plus the cross-attention path",
        "each residual passes its gradient on unchanged")
mistake("decoder-block-post-norm-second-use", BLOCK, "d_h = d_h + d_sum2", "d_h = d_h",
        "h reaches g = Nc(h + Cross(h, mem)) twice: through the cross-attention and directly",
        "each residual passes its gradient on unchanged")
SEQ = "t17_seq2seq.EncoderDecoder.decode_backward"
mistake("decoder-memory-last-layer-only", SEQ, "d_memory = d_memory + d_read", "d_memory = d_read",
        "every decoder layer read the memory: their gradients add up",
        "d_memory = sum over the layers of d_read")

# -- more shapes of the same mistakes --------------------------------------------------------------
mistake("prenorm-attention-gets-d-out", PRE, "d_a = self.attn.backward(d_h, cache.attn)",
        "d_a = self.attn.backward(d_out, cache.attn)",
        "the attention's output is added into h, so it receives d_h (which carries the FFN path), not d_out",
        PRE_RECHECK)
mistake("postnorm-residual-bypasses-norm", POST, "d_h = d_sum2 + self.ffn.backward(", "d_h = d_out + self.ffn.backward(",
        "the residual sum h + FFN(h) went through Norm2: the residual carries d_sum2, after Norm2's backward",
        POST_RECHECK)
mistake("postnorm-norm1-wrong-cache", POST, "d_sum1 = self.norm1.backward(d_h, cache.norm1)",
        "d_sum1 = self.norm1.backward(d_h, cache.norm2)", "each norm's backward needs its own cache", POST_RECHECK)
mistake("decoder-caches-not-reversed", LM, "cache.blocks[i], **moe_grads[i]",
        "cache.blocks[len(self.blocks) - 1 - i], **moe_grads[i]",
        "each block's backward runs with its own forward's cache", LM_RECHECK)
mistake("decoder-router-weight-missing", LM, "len(self.blocks), self.config.moe_aux_weight)", "len(self.blocks), 1.0)",
        "the pooled router loss enters the training loss times moe_aux_weight, and so does its gradient",
        LM_RECHECK)
mistake("log-softmax-diagonal-only", LOG, LOG_RETURN, "return d_out - cache.probs * d_out",
        "each log-probability depends on every input through the log-sum-exp: the correction is "
        "p * sum_j d_y_j", LOG_RECHECK)
mistake("log-softmax-last-axis", LOG, LOG_RETURN, "return d_out - cache.probs * np.sum(d_out, axis=-1, keepdims=True)",
        "the sum runs over the axis the log-softmax normalised (cache.axis), not always the last one",
        LOG_RECHECK)
mistake("log-softmax-no-max-shift", "t11_loss.log_softmax_forward", "shifted = x - np.max(x, axis=axis, keepdims=True)",
        "shifted = x", "without subtracting the maximum, exp overflows for large logits",
        "y = x - max - log sum e^(x - max)")
mistake("cross-entropy-no-mean", CE, "weight = cache.counted * (d_loss / max(cache.count, 1))",
        "weight = cache.counted * d_loss", "the loss is a mean over the counted targets: each gets 1/count of d_loss",
        CE_RECHECK)
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
mistake("moe-renormalisation-as-constant", MOE,
        "d_kept = (d_weights - np.sum(d_weights * weights, axis=-1, keepdims=True)) / cache.kept_total",
        "d_kept = d_weights / cache.kept_total",
        "the sum dividing the kept probabilities depends on them too: - sum_s d_weights_s weights_s",
        MOE_RECHECK)
mistake("moe-aux-without-n-experts", MOE, "d_mean_probs = d_aux * self.n_experts * cache.load",
        "d_mean_probs = d_aux * cache.load", "aux = E sum_e f_e P_e: the factor E stays in its gradient",
        MOE_RECHECK)
mistake("moe-aux-reaches-padding", MOE, "(cache.real[:, None] * d_mean_probs / n_real)", "(d_mean_probs / n_real)",
        "P_e averages the real tokens only: padded positions get no load-balancing gradient", MOE_RECHECK)
mistake("moe-aux-over-all-tokens", MOE, "n_real = max(int(cache.real.sum()), 1)", "n_real = len(cache.real)",
        "P_e is a mean over the real tokens: divide by their count, not by every position", MOE_RECHECK)
mistake("moe-forward-not-renormalised", "t14_moe.MoE.forward", "weights = kept / kept_total", "weights = kept",
        "the kept probabilities are renormalised to sum to 1 over the k chosen experts", MOE_RECHECK)
mistake("l2-normalize-dot-over-axis-0", L2, "np.sum(y * d_out, axis=-1, keepdims=True)",
        "np.sum(y * d_out, axis=0, keepdims=True)", "the dot y . d_out runs over each vector's d features",
        "d_x = (d_out - y (y . d_out)) / |x|")
mistake("l2-normalize-clamp-ignored", L2, "return np.where(cache.clamped, d_out, across) / length",
        "return across / length", "where |x| < eps the forward only divided by eps: there the gradient is "
        "d_out / eps, without the projection", "d_x = (d_out - y (y . d_out)) / |x|")
mistake("encoder-embeddings-get-d-out", ENC, "return self.embed.backward(d_x, cache.embed)",
        "return self.embed.backward(d_out, cache.embed)",
        "the embeddings receive the gradient after every block's backward (d_x), not the output's",
        "undo in reverse: final norm, the blocks from the last to the first, the embeddings")
mistake("mean-pool-over-padded-length", POOL, "return cache.weights[:, :, None] * d_pooled[:, None, :]",
        "return (cache.weights > 0)[:, :, None] * d_pooled[:, None, :] / cache.weights.shape[1]",
        "the mean is over the real tokens: divide by their count, not by the padded length N",
        "d_states[b, n] = m_bn d_pooled[b] / sum_n m_bn")
mistake("cross-attention-dq-without-transpose", CROSS, "d_q.transpose(0, 2, 1, 3).reshape(B, N, H * D)",
        "d_q.reshape(B, N, H * D)", "the heads axis goes back behind the positions before flattening d_q",
        "undo in reverse: Wo, merge heads, attention, Wq and Wkv")
mistake("cross-attention-mask-not-passed", "t16_cross_attention.CrossAttention.forward",
        "mixed, attn_cache = self.kernel.forward(q, k, v, mask)", "mixed, attn_cache = self.kernel.forward(q, k, v)",
        "the source padding mask never reaches the attention: the target reads padded source positions",
        "attention over the memory where may_read")
mistake("decode-logits-bias-mean", SEQ, "sum_over_positions(d_logits)",
        "d_logits.reshape(-1, d_logits.shape[-1]).mean(axis=0)",
        "the logits bias is added at every position: its gradient is the sum over positions, not the mean",
        "d_bias = sum over positions of d_logits")
mistake("postnorm-norm1-skipped", POST, "d_sum1 = self.norm1.backward(d_h, cache.norm1)", "d_sum1 = d_h",
        "h = Norm1(x + attended): d_h goes back through Norm1's backward first", POST_RECHECK)
mistake("postnorm-attention-reads-d-h", POST, "return d_sum1 + self.attn.backward(d_sum1, cache.attn)",
        "return d_sum1 + self.attn.backward(d_h, cache.attn)",
        "the attention's output entered the sum before Norm1: its gradient is d_sum1, after Norm1's backward",
        POST_RECHECK)
PRE_FWD = "t09_block.PreNormBlock.forward"
mistake("prenorm-forward-residual-from-normed", PRE_FWD, "h = x + attended", "h = a + attended",
        "the residual adds the block's input x, not its normalised copy: h = x + Attn(Norm1(x))", PRE_RECHECK)
mistake("prenorm-forward-norm2-reads-x", PRE_FWD, "f, norm2 = self.norm2.forward(h)", "f, norm2 = self.norm2.forward(x)",
        "the FFN reads Norm2(h), the stream after the attention's residual", PRE_RECHECK)
mistake("postnorm-forward-normalises-attention-only", "t09_block.PostNormBlock.forward",
        "h, norm1 = self.norm1.forward(x + attended)", "normed, norm1 = self.norm1.forward(attended)\n"
        "    h = x + normed", "Post-Norm normalises the residual sum: h = Norm1(x + Attn(x))", POST_RECHECK)
mistake("tied-head-table-never-added", HEAD, "self.weight.grad += d_weight_t.T", "pass",
        "the head reads the token table: it must add its share (x^T d_logits)^T into the table's gradient",
        "d_E += (x^T d_logits)^T")
mistake("tied-head-forward-scaled", "t10_model.TiedHead.forward", "linear_forward(x, self.weight.data.T)",
        "linear_forward(x, self.weight.data.T / np.sqrt(x.shape[-1]))",
        "the tied head is plain x E^T (no 1/sqrt(d))", "logits = x E^T")
mistake("decoder-router-grads-dropped", LM, "cache.blocks[i], **moe_grads[i])", "cache.blocks[i])",
        "with the pooled router loss each MoE block receives its share of that loss's gradient", LM_RECHECK)
mistake("log-softmax-sum-weighted-by-p", LOG, LOG_RETURN,
        "return d_out - cache.probs * np.sum(d_out * cache.probs, axis=cache.axis, keepdims=True)",
        "the subtracted term is p times the sum of d_y alone (d_y * p is softmax's rule)", LOG_RECHECK)
mistake("log-softmax-sum-without-p", LOG, LOG_RETURN, "return d_out - np.sum(d_out, axis=cache.axis, keepdims=True)",
        "the subtracted sum is shared out in proportion to p: p * sum(d_y)", LOG_RECHECK)
mistake("log-softmax-adds-the-max-back", "t11_loss.log_softmax_forward", "y = shifted - log_total",
        "y = x - log_total", "log_total was computed from x - max: y = (x - max) - log_total",
        "y = x - max - log sum e^(x - max)")
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
mistake("moe-aux-gradient-left-out", MOE, "d_probs += (cache.real[:, None] * d_mean_probs / n_real).astype(d_probs.dtype)",
        "d_probs = d_probs", "the load-balancing loss depends on the router probabilities through P_e: add its "
        "gradient", MOE_RECHECK)
mistake("moe-expert-gradients-overwrite", MOE, "d_flat[rows] += expert.backward(", "d_flat[rows] = expert.backward(",
        "with top-k > 1 a token visits several experts: add (+=) each expert's input gradient", MOE_RECHECK)
MOE_FWD = "t14_moe.MoE.forward"
mistake("moe-forward-least-likely-experts", MOE_FWD, "chosen = np.argsort(-probs,", "chosen = np.argsort(probs,",
        "argsort sorts in ascending order: sort -probs to choose the k most likely experts", MOE_RECHECK)
mistake("moe-forward-outputs-overwrite", MOE_FWD, "y[rows] += weights[rows, slots, None] * out",
        "y[rows] = weights[rows, slots, None] * out", "a token is served by k experts: add (+=) each weighted output",
        MOE_RECHECK)
mistake("moe-forward-aux-without-e", MOE_FWD, "aux_loss = float(E * np.dot(load, mean_probs))",
        "aux_loss = float(np.dot(load, mean_probs))", "the load-balancing loss is E sum_e f_e P_e", MOE_RECHECK)
mistake("moe-forward-load-counts-padding", MOE_FWD, "np.bincount(chosen[real].ravel()", "np.bincount(chosen.ravel()",
        "f_e counts the routing of real tokens only: leave padded positions out", MOE_RECHECK)
mistake("l2-normalize-dot-without-y", L2, "np.sum(y * d_out, axis=-1, keepdims=True)", "np.sum(d_out, axis=-1, keepdims=True)",
        "the part removed lies along y: y (y . d_out), the dot product of y with d_out",
        "d_x = (d_out - y (y . d_out)) / |x|")
mistake("encoder-caches-not-reversed", ENC, "zip(reversed(self.blocks), reversed(cache.blocks))",
        "zip(reversed(self.blocks), cache.blocks)", "each block is undone with its own cache: reverse both",
        "undo in reverse: final norm, the blocks from the last to the first, the embeddings")
mistake("mean-pool-forward-over-padded-length", "t15_encoder.mean_pool_forward",
        "weights = real / np.maximum(count, 1)", "weights = real / N",
        "the mean is over the real tokens: divide by their count, not the padded length N",
        "v_b = sum_n m_bn s_bn / sum_n m_bn")
L2F = "t15_encoder.l2_normalize_forward"
mistake("l2-normalize-forward-squared-length", L2F, "norm = np.sqrt(np.sum(x * x, axis=-1, keepdims=True))",
        "norm = np.sum(x * x, axis=-1, keepdims=True)", "the length is the square root of the sum of squares",
        "y = x / max(|x|, eps)")
mistake("l2-normalize-forward-adds-eps", L2F, "length = np.where(clamped, x.dtype.type(eps), norm)",
        "length = norm + eps", "the length is max(|x|, eps), not |x| + eps", "y = x / max(|x|, eps)")
mistake("cross-attention-kv-heads-not-moved-back", CROSS, "np.concatenate([d_k, d_v], axis=1).transpose(0, 2, 1, 3)",
        "np.concatenate([d_k, d_v], axis=1)",
        "the heads came from [B, M, 2 H_kv, D]: move the heads axis back behind the positions",
        "d_memory = [d_k | d_v] [Wk | Wv]^T")
CROSS_FWD = "t16_cross_attention.CrossAttention.forward"
mistake("cross-attention-kv-interleaved", CROSS_FWD, "k, v = kv[:, :H_kv], kv[:, H_kv:]", "k, v = kv[:, 0::2], kv[:, 1::2]",
        "the kv projection's columns are [K | V], all key heads first", "k = kv[:, :H_kv], v = kv[:, H_kv:]")
mistake("cross-attention-merge-without-transpose", CROSS_FWD, "merged = mixed.transpose(0, 2, 1, 3).reshape(B, N, H * D)",
        "merged = mixed.reshape(B, N, H * D)", "put the heads side by side per position: [B, N, H, D] first",
        "[B, H, N, D] -> [B, N, H*D]")
mistake("decoder-block-self-attention-reads-d-g", BLOCK, "d_a = self.attn.backward(d_h, cache.attn)",
        "d_a = self.attn.backward(d_g, cache.attn)",
        "the self-attention's output entered h, so its gradient is d_h (which carries the cross path)",
        "each residual passes its gradient on unchanged")
mistake("decode-final-norm-skipped", SEQ, "d_x = self.final_norm.backward(d_x, cache.final_norm)", "d_x = d_x",
        "the decoder ends in a final norm: undo it right after the head", "d_memory = sum over the layers of d_read")
mistake("log-softmax-sum-over-everything", LOG, LOG_RETURN, "return d_out - cache.probs * np.sum(d_out)",
        "the sum of d_y runs over each row (the softmax's axis), not over the whole array", LOG_RECHECK)
LOG_FWD = "t11_loss.log_softmax_forward"
mistake("log-softmax-lse-unshifted", LOG_FWD, "np.sum(np.exp(shifted), axis=axis, keepdims=True)",
        "np.sum(np.exp(x), axis=axis, keepdims=True)",
        "the log-sum-exp is subtracted from the shifted scores, so it must be of the shifted scores too",
        "y = (x - max) - log sum e^(x - max)")
mistake("cross-entropy-indexes-raw-targets", CEF, "safe[..., None], axis=-1)", "targets[..., None], axis=-1)",
        "an ignored target (-100) must not be used as an index: pick with the targets where ignored ones "
        "are replaced, then drop them", "loss = -mean over counted targets of log p(target)")
mistake("adamw-second-moment-beta1", ADAM, "v = b2 * v + (1 - b2) * grad * grad", "v = b2 * v + (1 - b1) * grad * grad",
        "the second moment's new share is (1 - b2) g^2: b1 belongs to the first moment", ADAM_RECHECK)
mistake("prenorm-ffn-extra-gradients-dropped", PRE, "self.ffn.backward(d_out, cache.ffn, **ffn_grads)",
        "self.ffn.backward(d_out, cache.ffn)",
        "the extra gradients for the FFN (an MoE router's) must be handed on to its backward", PRE_RECHECK)
mistake("prenorm-attention-reads-x", PRE_FWD, "self.attn.forward(a, mask, positions, kv)",
        "self.attn.forward(x, mask, positions, kv)",
        "in a Pre-Norm block the attention reads Norm1(x), not x", "h = x + Attn(Norm1(x))")
mistake("prenorm-attention-without-mask-and-positions", PRE_FWD, "self.attn.forward(a, mask, positions, kv)",
        "self.attn.forward(a)", "the mask, the positions and the KV cache must reach the attention",
        "h = x + Attn(Norm1(x), mask, positions)")
mistake("postnorm-second-residual-missing", "t09_block.PostNormBlock.forward", "self.norm2.forward(h + fed)",
        "self.norm2.forward(fed)", "Norm2 normalises the residual sum h + FFN(h), not FFN(h) alone",
        "y = Norm2(h + FFN(h))")
mistake("decoder-extra-residual-around-blocks", LM, "d_x = self.blocks[i].backward(d_x, cache.blocks[i]",
        "d_x = d_x + self.blocks[i].backward(d_x, cache.blocks[i]",
        "a block's backward already carries its residual paths: adding d_x again counts the identity twice",
        LM_RECHECK)
mistake("moe-renormalisation-not-divided", MOE,
        "d_kept = (d_weights - np.sum(d_weights * weights, axis=-1, keepdims=True)) / cache.kept_total",
        "d_kept = d_weights - np.sum(d_weights * weights, axis=-1, keepdims=True)",
        "weights = kept / sum(kept): its backward divides by sum(kept) too", MOE_RECHECK)
mistake("moe-given-d-aux-ignored", MOE, "d_aux = self.aux_weight if d_aux is None else d_aux",
        "d_aux = self.aux_weight", "when the caller passes d_aux (the pooled loss's weight), it replaces "
        "aux_weight", MOE_RECHECK)
mistake("cross-attention-kv-joined-on-features", CROSS, "np.concatenate([d_k, d_v], axis=1)",
        "np.concatenate([d_k, d_v], axis=-1)",
        "the kv projection's columns are all key heads, then all value heads: join d_k and d_v on the "
        "heads axis", "d_memory = [d_k | d_v] [Wk | Wv]^T")
mistake("decoder-block-cross-norm-skipped", BLOCK, "d_g + self.cross_norm.backward(d_c, cache.cross_norm)",
        "d_g + d_c", "the cross-attention read Nc(h): its gradient goes back through Nc before reaching h",
        "each residual passes its gradient on unchanged; each norm has a backward")
mistake("cross-attention-forward-k-and-v-swapped", CROSS_FWD, "k, v = kv[:, :H_kv], kv[:, H_kv:]",
        "v, k = kv[:, :H_kv], kv[:, H_kv:]", "the kv projection's columns are [K | V]: keys first",
        "k = kv[:, :H_kv], v = kv[:, H_kv:]")
mistake("cross-attention-kv-reshaped-without-transpose", CROSS_FWD,
        "kv_flat.reshape(B, M, 2 * H_kv, D).transpose(0, 2, 1, 3)", "kv_flat.reshape(B, 2 * H_kv, M, D)",
        "the features of each position split into heads: [B, M, 2 H_kv, D], then swap M and the heads",
        "[B, M, 2 H_kv D] -> [B, M, 2 H_kv, D] -> [B, 2 H_kv, M, D]")
mistake("cross-attention-causal", CROSS_FWD, "self.kernel.forward(q, k, v, mask)",
        "self.kernel.forward(q, k, v, mask, causal=True)",
        "cross-attention is not causal: every target position may read every real source position",
        "weights = softmax(q k^T / sqrt(D)) where the source is not padding")

# -- written as a learner writes them ------------------------------------------------------------
mistake("postnorm-norm1-gets-d-sum2", POST, "d_sum1 = self.norm1.backward(d_h, cache.norm1)",
        "d_sum1 = self.norm1.backward(d_sum2, cache.norm1)",
        "h feeds the FFN and the second residual: Norm1's backward takes d_h, both paths summed",
        POST_RECHECK)
mistake("prenorm-forward-second-residual-from-x", PRE_FWD, "y = h + fed", "y = x + fed",
        "the second residual adds to h = x + Attn(...), not to x: the attention's output is lost",
        PRE_RECHECK)
mistake("postnorm-forward-residual-dropped", "t09_block.PostNormBlock.forward",
        "h, norm1 = self.norm1.forward(x + attended)", "h, norm1 = self.norm1.forward(attended)",
        "Post-Norm normalises the residual sum x + Attn(x), not the attention output alone", POST_RECHECK)
mistake("postnorm-forward-ffn-reads-sum", "t09_block.PostNormBlock.forward",
        "fed, ffn = self.ffn.forward(h, **ffn_inputs)", "fed, ffn = self.ffn.forward(x + attended, **ffn_inputs)",
        "the FFN reads h = Norm1(x + Attn(x)), the normalised sum", POST_RECHECK)
mistake("decoder-block-gradients-not-chained", LM,
        "d_x = self.blocks[i].backward(d_x, cache.blocks[i], **moe_grads[i])",
        "d_block = self.blocks[i].backward(d_x, cache.blocks[i], **moe_grads[i])",
        "each block's input gradient is the next one's upstream: assign it back to d_x", LM_RECHECK)
mistake("tied-head-forward-scales-x", "t10_model.TiedHead.forward", "linear_forward(x, self.weight.data.T)",
        "linear_forward(x / np.sqrt(x.shape[-1]), self.weight.data.T)",
        "the tied head is plain x E^T (no 1/sqrt(d))", "logits = x E^T")
mistake("cross-entropy-count-unguarded", CE, "d_loss / max(cache.count, 1)", "d_loss / cache.count",
        "when every target is ignored the count is 0: the loss and its gradient are 0, not 0/0",
        CE_RECHECK)
mistake("log-softmax-log-of-softmax", LOG_FWD, "y = shifted - log_total",
        "y = np.log(np.exp(shifted) / np.exp(log_total))",
        "log(softmax) underflows to log(0) = -inf for very negative scores: subtract the log-sum instead",
        "log softmax(x) = x - max - log sum exp(x - max)")
mistake("adamw-decay-normalised", ADAM, ("data = data - lr * weight_decay * data", "lr * m_hat / (np.sqrt(v_hat) + eps)"),
        ("data = data", "lr * (m_hat + weight_decay * data) / (np.sqrt(v_hat) + eps)"),
        "decoupled decay is lr * wd * p, outside Adam's normalisation; dividing it by sqrt(v_hat) is "
        "Adam's L2, not AdamW", ADAM_RECHECK)
mistake("moe-router-gradient-overwrites", MOE, "d_flat += self.router.backward(d_logits, cache.router)",
        "d_flat = self.router.backward(d_logits, cache.router)",
        "x feeds the experts and the router: d_x is the sum of both (+=)", MOE_RECHECK)
mistake("moe-forward-load-first-choice", MOE_FWD, "np.bincount(chosen[real].ravel(), minlength=E)",
        "np.bincount(chosen[real][:, 0], minlength=E)",
        "f_e counts every one of a token's k choices, not only its first", "f_e = (tokens routed to e) / T")
mistake("encoder-caches-reversed-blocks-not", ENC, "zip(reversed(self.blocks), reversed(cache.blocks))",
        "zip(self.blocks, reversed(cache.blocks))",
        "each block's backward needs its own cache: reverse the blocks and their caches together",
        "undo in reverse: final norm, the blocks from the last to the first, the embeddings")
mistake("mean-pool-forward-unguarded", "t15_encoder.mean_pool_forward", "real / np.maximum(count, 1)",
        "real / count", "a row without real tokens has count 0: guard it (its mean is 0, not 0/0)",
        "v_b = sum_n m_bn s_bn / max(sum_n m_bn, 1)")
mistake("cross-entropy-forward-sign", CEF, "loss = -np.sum(picked * counted) / max(count, 1)",
        "loss = np.sum(picked * counted) / max(count, 1)",
        "the loss is minus the mean log-probability of the targets (log p <= 0, the loss >= 0)",
        "loss = -(1/count) sum over counted targets of log p")
mistake("cross-entropy-forward-no-mean", CEF, "loss = -np.sum(picked * counted) / max(count, 1)",
        "loss = -np.sum(picked * counted)", "the loss is the mean over the counted targets, not their sum",
        "loss = -(1/count) sum over counted targets of log p")
mistake("l2-normalize-projection-sign", L2, "across = d_out - y * np.sum(y * d_out, axis=-1, keepdims=True)",
        "across = d_out + y * np.sum(y * d_out, axis=-1, keepdims=True)",
        "the part of d_out along y is removed, not added", "d_x = (d_y - y (y . d_y)) / |x|")
mistake("l2-normalize-length-squared", L2, "return np.where(cache.clamped, d_out, across) / length",
        "return np.where(cache.clamped, d_out, across) / length ** 2",
        "y = x / |x| is divided by |x| once, and so is its gradient", "d_x = (d_y - y (y . d_y)) / |x|")
mistake("l2-normalize-forward-whole-array", L2F, "norm = np.sqrt(np.sum(x * x, axis=-1, keepdims=True))",
        "norm = np.sqrt(np.sum(x * x))", "each vector is divided by its own length (the sum over its last axis)",
        "y = x / max(|x|, eps), |x| over the last axis")
mistake("mean-pool-forward-mask-ignored", "t15_encoder.mean_pool_forward",
        "real = np.ones((B, N), states.dtype) if key_mask is None else key_mask.astype(states.dtype)",
        "real = np.ones((B, N), states.dtype)", "padding positions must not enter the mean: use the key mask",
        "v_b = sum_n m_bn s_bn / sum_n m_bn")
mistake("cross-attention-heads-not-split-back", CROSS, "d_merged.reshape(B, N, H, D).transpose(0, 2, 1, 3)",
        "d_merged.reshape(B, H, N, D)", "the merged features are [B, N, H*D]: split them per position, then move "
        "the heads forward", "undo in reverse: Wo, merge heads, attention, Wq and Wkv")
mistake("decoder-block-ffn-residual-dropped", BLOCK, "d_g = d_out + self.norm2.backward(d_f, cache.norm2)",
        "d_g = self.norm2.backward(d_f, cache.norm2)", "y = g + FFN(N2(g)): the residual passes d_out on to g",
        "each residual passes its gradient on unchanged")
mistake("decoder-block-self-residual-dropped", BLOCK, "d_x = d_h + self.norm1.backward(d_a, cache.norm1)",
        "d_x = self.norm1.backward(d_a, cache.norm1)", "h = x + Attn(N1(x)): the residual passes d_h on to x",
        "each residual passes its gradient on unchanged")
mistake("decoder-block-cross-reads-d-out", BLOCK, "self.cross_attn.backward(d_g, cache.cross_attn)",
        "self.cross_attn.backward(d_out, cache.cross_attn)",
        "the cross-attention's output entered g: its gradient is d_g, which carries the FFN path",
        "each residual passes its gradient on unchanged")
mistake("decoder-block-post-ffn-residual-dropped", BLOCK, "d_g = d_sum3 + self.ffn.backward(d_sum3, cache.ffn)",
        "d_g = self.ffn.backward(d_sum3, cache.ffn)", "N2 normalised g + FFN(g): g also receives d_sum3 directly",
        "each residual passes its gradient on unchanged")
mistake("decoder-block-post-self-residual-dropped", BLOCK, "d_x = d_sum1 + self.attn.backward(d_sum1, cache.attn)",
        "d_x = self.attn.backward(d_sum1, cache.attn)", "N1 normalised x + Attn(x): x also receives d_sum1 directly",
        "each residual passes its gradient on unchanged")
mistake("decode-logits-bias-assigned", SEQ, "self.logits_bias.grad += sum_over_positions(d_logits)",
        "self.logits_bias.grad = sum_over_positions(d_logits)", "logits_bias.grad is accumulated (+=)",
        "logits_bias.grad += sum over positions of d_logits")
mistake("decode-blocks-in-forward-order", SEQ, "zip(reversed(self.blocks), reversed(cache.blocks))",
        "zip(self.blocks, cache.blocks)", "the decoder layers are undone last first",
        "undo in reverse: head, final norm, the layers from the last to the first, the embeddings")
mistake("decode-embeddings-skipped", SEQ, "self.embed.backward(d_x, cache.embed)", "None",
        "the target embeddings receive the gradient that reaches the bottom of the decoder",
        "undo in reverse: head, final norm, the layers from the last to the first, the embeddings")
mistake("postnorm-norm2-wrong-cache", POST, "d_sum2 = self.norm2.backward(d_out, cache.norm2)",
        "d_sum2 = self.norm2.backward(d_out, cache.norm1)", "each norm's backward needs its own forward's cache",
        POST_RECHECK)
mistake("prenorm-forward-ffn-reads-h", PRE_FWD, "fed, ffn = self.ffn.forward(f, **ffn_inputs)",
        "fed, ffn = self.ffn.forward(h, **ffn_inputs)", "Pre-Norm: the FFN reads Norm2(h), not h itself",
        PRE_RECHECK)
mistake("postnorm-forward-normalises-ffn-only", "t09_block.PostNormBlock.forward",
        "y, norm2 = self.norm2.forward(h + fed)", "normed, norm2 = self.norm2.forward(fed)\n    y = h + normed",
        "Post-Norm normalises the residual sum: y = Norm2(h + FFN(h))", POST_RECHECK)
mistake("tied-head-outer-of-sums", HEAD, "self.weight.grad += d_weight_t.T",
        "self.weight.grad += np.outer(d_out.reshape(-1, d_out.shape[-1]).sum(axis=0), "
        "cache.x.reshape(-1, cache.x.shape[-1]).sum(axis=0))",
        "d_E sums each position's outer product d_logits^T x: the outer product of the sums is another matrix",
        "d_E += (x^T d_logits)^T")
mistake("tied-head-forward-shifted", "t10_model.TiedHead.forward", "return linear_forward(x, self.weight.data.T)",
        "logits, cache = linear_forward(x, self.weight.data.T)\n"
        "    return logits - logits.max(axis=-1, keepdims=True), cache",
        "the head returns the logits x E^T; subtracting the maximum belongs inside the softmax", "logits = x E^T")
mistake("cross-entropy-one-hot-fancy-index", CE, "np.put_along_axis(one_hot, cache.targets[..., None], 1, axis=-1)",
        "one_hot[..., cache.targets] = 1",
        "one_hot[..., targets] puts a 1 at every target id in every row; each row needs one 1, at its own "
        "target (put_along_axis)", CE_RECHECK)
mistake("log-softmax-caches-unnormalised", LOG_FWD, "LogSoftmaxCache(np.exp(y), axis)",
        "LogSoftmaxCache(np.exp(shifted), axis)",
        "the backward needs the probabilities e^y; e^(x - max) is not normalised",
        "log softmax(x) = x - max - log sum exp(x - max)")
mistake("adamw-v-not-corrected", ADAM, "v_hat = v / (1 - b2 ** step)", "v_hat = v",
        "v starts at 0 as well: divide it by 1 - b2^t too", ADAM_RECHECK)
mistake("adamw-no-sqrt", ADAM, "np.sqrt(v_hat) + eps", "v_hat + eps",
        "the step divides by the root of the second moment, sqrt(v_hat) + eps", ADAM_RECHECK)
mistake("moe-renormalisation-cross-term-transposed", MOE,
        "(d_weights - np.sum(d_weights * weights, axis=-1, keepdims=True))",
        "(d_weights - weights * np.sum(d_weights, axis=-1, keepdims=True))",
        "the quotient rule's cross term is sum_s d_weights_s weights_s, the same for every entry",
        MOE_RECHECK)
mistake("moe-weight-after-expert-backward", MOE,
        "d_flat[rows] += expert.backward(weights[rows, slots, None] * d_y[rows], call.expert)",
        "d_flat[rows] += weights[rows, slots, None] * expert.backward(d_y[rows], call.expert)",
        "the routing weight scales d_y before the expert's backward, or the expert's parameters get the "
        "unweighted gradient", MOE_RECHECK)
mistake("moe-forward-load-over-k", MOE_FWD, "minlength=E) / n_real", "minlength=E) / (n_real * k)",
        "f_e is the share of tokens that send a choice to e (the f_e sum to k): no division by k",
        "f_e = (tokens routed to e) / T")
mistake("l2-normalize-projection-with-x", L2, "across = d_out - y * np.sum(y * d_out, axis=-1, keepdims=True)",
        "across = d_out - length * y * np.sum(y * d_out, axis=-1, keepdims=True)",
        "written with x, the projection is x (x . d_y) / |x|^2: one factor of |x| is missing",
        "d_x = (d_y - y (y . d_y)) / |x|")
mistake("encoder-embeddings-skipped", ENC, "return self.embed.backward(d_x, cache.embed)", "return None",
        "the ids get no gradient, but the embedding tables (and their norm) do: run the embeddings' backward",
        "undo in reverse: final norm, the blocks from the last to the first, the embeddings")
mistake("decoder-block-cross-norm-wrong-cache", BLOCK, "self.cross_norm.backward(d_c, cache.cross_norm)",
        "self.cross_norm.backward(d_c, cache.norm1)", "each norm's backward needs its own forward's cache",
        "each residual passes its gradient on unchanged; each norm has a backward")
