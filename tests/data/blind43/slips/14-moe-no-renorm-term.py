# exercise: moe
# function: t14_moe.py:MoE.backward
# slip: the renormalisation's sum term is missing from the gradient of the kept probabilities
def backward(self, d_out, cache, d_aux=None, d_mean_probs=None):
    """d_x; parameters get the gradient of <y, d_out> + d_aux * aux (d_aux: aux_weight),
    or of <y, d_out> + <P, d_mean_probs> when ``d_mean_probs`` [E] is given."""
    if d_mean_probs is None:
        d_aux = self.aux_weight if d_aux is None else d_aux
        d_mean_probs = d_aux * self.n_experts * cache.load       # aux = E sum_e f_e P_e
    d = cache.shape[-1]
    d_y = d_out.reshape(-1, d)                                    # [T, d]
    weights = cache.weights
    d_flat = np.zeros_like(d_y)                                   # [T, d]
    d_weights = np.zeros_like(weights)                            # [T, k]
    for expert, call in zip(self.experts, cache.calls):
        if call is None:
            continue
        rows, slots = call.rows, call.slots
        d_weights[rows, slots] = np.sum(d_y[rows] * call.out, axis=-1)
        d_flat[rows] += expert.backward(weights[rows, slots, None] * d_y[rows], call.expert)
    # weights = kept / sum(kept):  d_kept = (d_weights - sum_s d_weights_s weights_s) / sum(kept)
    d_kept = d_weights / cache.kept_total
    d_probs = np.zeros_like(cache.probs)                          # [T, E]
    np.put_along_axis(d_probs, cache.chosen, d_kept, axis=-1)     # the k chosen are distinct
    # forward: P_e = mean over the real tokens t of probs[t, e]
    n_real = max(int(cache.real.sum()), 1)
    d_probs += (cache.real[:, None] * d_mean_probs / n_real).astype(d_probs.dtype)
    d_logits = softmax_backward(d_probs, cache.softmax)
    d_flat += self.router.backward(d_logits, cache.router)
    return d_flat.reshape(cache.shape)
