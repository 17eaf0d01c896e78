"""Mistakes in the mixture of experts (t14_moe.py): routing, the load, the renormalised weights."""
from .registry import mistake

MOE = "t14_moe.MoE.backward"
MOE_RECHECK = "y = sum over the k chosen experts of weight_e FFN_e(x); weights = renormalised router softmax"
MOE_FWD = "t14_moe.MoE.forward"

# -- MoE.backward -----------------------------------------------------------------------------------
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
mistake("moe-aux-gradient-left-out", MOE, "d_probs += (cache.real[:, None] * d_mean_probs / n_real).astype(d_probs.dtype)",
        "d_probs = d_probs", "the load-balancing loss depends on the router probabilities through P_e: add its "
        "gradient", MOE_RECHECK)
mistake("moe-expert-gradients-overwrite", MOE, "d_flat[rows] += expert.backward(", "d_flat[rows] = expert.backward(",
        "with top-k > 1 a token visits several experts: add (+=) each expert's input gradient", MOE_RECHECK)
mistake("moe-renormalisation-not-divided", MOE,
        "d_kept = (d_weights - np.sum(d_weights * weights, axis=-1, keepdims=True)) / cache.kept_total",
        "d_kept = d_weights - np.sum(d_weights * weights, axis=-1, keepdims=True)",
        "weights = kept / sum(kept): its backward divides by sum(kept) too", MOE_RECHECK)
mistake("moe-given-d-aux-ignored", MOE, "d_aux = self.aux_weight if d_aux is None else d_aux",
        "d_aux = self.aux_weight", "when the caller passes d_aux (the pooled loss's weight), it replaces "
        "aux_weight", MOE_RECHECK)
mistake("moe-router-gradient-overwrites", MOE, "d_flat += self.router.backward(d_logits, cache.router)",
        "d_flat = self.router.backward(d_logits, cache.router)",
        "x feeds the experts and the router: d_x is the sum of both (+=)", MOE_RECHECK)
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

# -- MoE.forward ------------------------------------------------------------------------------------
mistake("moe-forward-not-renormalised", "t14_moe.MoE.forward", "weights = kept / kept_total", "weights = kept",
        "the kept probabilities are renormalised to sum to 1 over the k chosen experts", MOE_RECHECK)
mistake("moe-forward-least-likely-experts", MOE_FWD, "chosen = np.argsort(-probs,", "chosen = np.argsort(probs,",
        "argsort sorts in ascending order: sort -probs to choose the k most likely experts", MOE_RECHECK)
mistake("moe-forward-outputs-overwrite", MOE_FWD, "y[rows] += weights[rows, slots, None] * out",
        "y[rows] = weights[rows, slots, None] * out", "a token is served by k experts: add (+=) each weighted output",
        MOE_RECHECK)
mistake("moe-forward-aux-without-e", MOE_FWD, "aux_loss = float(E * np.dot(load, mean_probs))",
        "aux_loss = float(np.dot(load, mean_probs))", "the load-balancing loss is E sum_e f_e P_e", MOE_RECHECK)
mistake("moe-forward-load-counts-padding", MOE_FWD, "np.bincount(chosen[real].ravel()", "np.bincount(chosen.ravel()",
        "f_e counts the routing of real tokens only: leave padded positions out", MOE_RECHECK)
mistake("moe-forward-load-first-choice", MOE_FWD, "np.bincount(chosen[real].ravel(), minlength=E)",
        "np.bincount(chosen[real][:, 0], minlength=E)",
        "f_e counts every one of a token's k choices, not only its first", "f_e = (tokens routed to e) / T")
mistake("moe-forward-load-over-k", MOE_FWD, "minlength=E) / n_real", "minlength=E) / (n_real * k)",
        "f_e is the share of tokens that send a choice to e (the f_e sum to k): no division by k",
        "f_e = (tokens routed to e) / T")
