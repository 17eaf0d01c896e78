# exercise: moe
# function: t14_moe.py:MoE.forward
# slip: the argsort is ascending: the k least likely experts are chosen
def forward(self, x, token_mask=None):
    """x [..., d] -> y [..., d]; ``token_mask`` [...] bool (True at real tokens) keeps
    padded positions out of the routing statistics f and P."""
    E, k = self.n_experts, self.top_k
    d = x.shape[-1]
    flat = x.reshape(-1, d)                                       # [T, d]
    logits, router = self.router.forward(flat)                    # [T, E]
    probs, softmax = softmax_forward(logits)                      # [T, E]
    # top-k per token; a stable sort sends ties to the lower expert index
    chosen = np.argsort(probs, axis=-1, kind="stable")[:, :k]    # [T, k]
    kept = np.take_along_axis(probs, chosen, axis=-1)             # [T, k]
    kept_total = kept.sum(axis=-1, keepdims=True)                 # [T, 1]
    weights = kept / kept_total                                   # [T, k]

    y = np.zeros_like(flat)                                       # [T, d]
    calls = []
    for e, expert in enumerate(self.experts):                     # gather each expert's tokens
        rows, slots = np.nonzero(chosen == e)                     # [T_e], [T_e]
        if len(rows) == 0:
            calls.append(None)
            continue
        out, expert_cache = expert.forward(flat[rows])            # [T_e, d]
        y[rows] += weights[rows, slots, None] * out               # a token meets e at most once
        calls.append(ExpertCall(rows, slots, out, expert_cache))

    real = self._real_tokens(token_mask, x.shape[:-1])            # [T]
    n_real = max(int(real.sum()), 1)
    load = np.bincount(chosen[real].ravel(), minlength=E) / n_real   # f_e [E], sums to k
    mean_probs = probs[real].sum(axis=0) / n_real                 # P_e [E]
    aux_loss = float(E * np.dot(load, mean_probs))
    return y.reshape(x.shape), MoECache(router, softmax, chosen, weights, kept_total,
                                        tuple(calls), real, load, mean_probs, aux_loss, x.shape)
