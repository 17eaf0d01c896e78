# exercise: moe
# function: t14_moe.py:MoE.backward
# correct: the routing weights' gradient gathered per token and slot, the softmax over the kept k written as a Jacobian product
def backward(self, d_out, cache, d_aux=None, d_mean_probs=None):
    if d_mean_probs is None:
        d_aux = self.aux_weight if d_aux is None else d_aux
        d_mean_probs = d_aux * self.n_experts * cache.load
    T, k = cache.weights.shape
    d_y = d_out.reshape(T, -1)
    d_x = np.zeros_like(d_y)
    d_w = np.zeros_like(cache.weights)
    for expert, call in zip(self.experts, cache.calls):
        if call is None:
            continue
        w = cache.weights[call.rows, call.slots][:, None]
        d_x[call.rows] += expert.backward(w * d_y[call.rows], call.expert)
        d_w[call.rows, call.slots] = (d_y[call.rows] * call.out).sum(-1)
    w = cache.weights
    jac = (np.eye(k)[None] - w[:, :, None]) / cache.kept_total[:, :, None]     # d w_s / d kept_j = (delta_sj - w_s) / total
    d_kept = np.einsum("ts,tsj->tj", d_w, jac)
    d_probs = np.zeros_like(cache.probs)
    rows = np.arange(T)[:, None]
    d_probs[rows, cache.chosen] += d_kept
    real = cache.real.astype(d_probs.dtype)
    d_probs += real[:, None] * d_mean_probs[None, :] / max(real.sum(), 1)
    d_x += self.router.backward(softmax_backward(d_probs, cache.softmax), cache.router)
    return d_x.reshape(cache.shape)
