"""X directly vs separate Q/K/V projections: what binding "how to match" to "what to pass" costs.

The first article: attention could use X itself as queries, keys and values,
but then the same numbers decide the match and are handed over. Three facts
show the cost, each checked on npformer's ``attention_forward``:
1. with Q = K = X the scores are symmetric (i matches j exactly as j matches i);
2. when the rows have the same length (as after a norm), every position's best
   match is itself; projections can make each position look for its predecessor;
3. the output is a mix of the rows themselves, matching features included;
   a value projection passes on only what it selects.
"""
import math

import numpy as np

from npformer import RMSNorm, attention_forward, causal_mask
from npformer.worked import vec


def self_attention(q, k, v, mask=None):
    """One head over N positions: q, k, v [N, D] -> (scores [N, N], weights [N, N], out [N, D])."""
    mixed, cache = attention_forward(q[None, None], k[None, None], v[None, None], mask)
    scores = q @ k.T / math.sqrt(q.shape[-1])
    return scores, cache.weights[0, 0], mixed[0, 0]


def x_directly(out):
    """Facts 1 and 2 with Q = K = V = X, then a projection that reads the previous position."""
    N, d = 5, 8
    x = RMSNorm(d, eps=0.0, dtype=np.float64)(np.random.default_rng(4).standard_normal((N, d)))
    out(f"1. X: {N} positions of width {d}, each row normalised to length sqrt({d}) "
        f"(lengths {vec(np.linalg.norm(x, axis=1))})")
    scores, weights, _ = self_attention(x, x, x)
    symmetric_gap = float(np.abs(scores - scores.T).max())
    out(f"   Q = K = X: scores symmetric (largest |S - S^T| = {symmetric_gap:.1e}); "
        f"each row's largest score at positions {scores.argmax(axis=1).tolist()}: itself")
    out(f"   first row of weights {vec(weights[0])}: reads itself most")

    c = 8.0
    shift = np.eye(N, k=-1)                                   # shift[i, i - 1] = 1
    w_q = np.linalg.pinv(x) @ (c * shift @ np.linalg.pinv(x.T))   # solves (X Wq) X^T = c * shift
    q = x @ w_q                                               # Wk = identity: K = X
    proj_scores, proj_weights, _ = self_attention(q, x, x, causal_mask(N))
    raw = q @ x.T
    out(f"2. Wq chosen so that (X Wq) X^T = {c:.0f} x shift: position i looks for position i - 1")
    out(f"   largest |(X Wq) X^T - {c:.0f} shift| = {np.abs(raw - c * shift).max():.1e}; "
        f"scores no longer symmetric")
    out(f"   weights (causal): positions read most {proj_weights.argmax(axis=1).tolist()} "
        f"(position 0 has only itself)")
    out(f"   row 3: {vec(proj_weights[3])}: e^(8/sqrt(8)) / (e^(8/sqrt(8)) + 3) = "
        f"{math.exp(c / math.sqrt(d)) / (math.exp(c / math.sqrt(d)) + 3):.3f} on position 2")
    return {"x_lengths": np.linalg.norm(x, axis=1), "scores": scores, "symmetric_gap": symmetric_gap,
            "weights": weights, "shift_scale": c, "raw_projected_scores": raw,
            "shift_scores": proj_scores, "shift_weights": proj_weights}


def read(query, keys, values):
    """One query against M keys: (weights [M], output [Dv]) from ``attention_forward``."""
    mixed, cache = attention_forward(query[None, None, None], keys[None, None], values[None, None])
    return cache.weights[0, 0, 0], mixed[0, 0, 0]


def match_one_feature_pass_another(out):
    """Fact 3: one query reading two earlier positions, features [quality, no-reason, merchant
    pays, buyer pays] (teaching data: what each position says about a return)."""
    context = np.array([[1.0, 0.0, 1.0, 0.0],                 # "quality problem: the merchant pays"
                        [0.0, 1.0, 0.0, 1.0]])                # "no-reason return: the buyer pays"
    query_row = np.array([1.0, 0.0, 0.0, 0.0])                # asks about a quality return
    direct_weights, direct = read(query_row, context, context)
    types, conditions = np.eye(4)[:, :2], np.eye(4)[:, 2:]    # [4, 2] selectors
    w_q, w_k, w_v = 4.0 * types, types, conditions
    projected_weights, projected = read(query_row @ w_q, context @ w_k, context @ w_v)
    out("3. A question about a quality return reads two earlier positions "
        "(features: quality, no-reason, merchant pays, buyer pays)")
    out(f"   X directly:  weights {vec(direct_weights)} -> {vec(direct)}: "
        "the type features it matched on come back mixed with the answer")
    out(f"   Wq = 4 x (type), Wk = (type), Wv = (condition): weights {vec(projected_weights)} "
        f"-> {vec(projected)} (merchant pays, buyer pays): only the condition")

    changed = context.copy()
    changed[0, 2:] = [0.0, 1.0]                               # position A now says "the buyer pays"
    changed_weights, changed_out = read(query_row @ w_q, changed @ w_k, changed @ w_v)
    out(f"   A's condition changed to 'buyer pays': weights {vec(changed_weights)} "
        f"(unchanged: the match never saw the condition), output {vec(changed_out)}")
    return {"direct_weights": direct_weights, "direct_output": direct,
            "projected_weights": projected_weights, "projected_output": projected,
            "changed_weights": changed_weights, "changed_output": changed_out}


def run(out=print):
    return {**x_directly(out), **match_one_feature_pass_another(out)}


if __name__ == "__main__":
    run()
