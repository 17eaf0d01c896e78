"""Dividing by sqrt(D) controls the scale of the scores; it does not confine them to a fixed range.

The first article is careful here: scaling keeps the spread of q.k from
growing with the head width D, but it "is not normalising every score into a
fixed interval". Shown on npformer's attention and softmax:
1. q.k / sqrt(D) grows with the lengths of q and k without any bound (a cosine
   similarity would stay in [-1, 1]);
2. for random entries of standard deviation s the scaled scores have standard
   deviation s^2 at every D: the width no longer matters, the entries' size does;
3. a large score gap makes softmax nearly one-hot, and the gradient reaching the
   scores, w (1 - w) for two keys, vanishes: why the article wants the scale controlled.
"""
import math

import numpy as np

from npformer import scaled_dot_product_attention, softmax_backward, softmax_forward
from npformer.worked import vec


def score_of(q, k):
    """The scaled score of one query and one key, read from the attention weights' logit:
    with a second, zero key the weights are softmax([s, 0]), so s = ln(w0 / w1)."""
    keys = np.stack([k, np.zeros_like(k)])
    _, weights = scaled_dot_product_attention(q[None, None, None], keys[None, None], keys[None, None])
    w = weights[0, 0, 0]
    return float(np.log(w[0] / w[1]))


def unbounded(out):
    """Fact 1: scores of q = k = a e_1 for a few lengths a."""
    D = 4
    direction = np.eye(D)[0]
    out(f"1. q = k = a x {vec(direction, 0)} (D = {D}): the scaled score is a^2 / sqrt({D}) = a^2 / 2")
    scores = {}
    for a in (1.0, 4.0, 10.0):
        scores[a] = score_of(a * direction, a * direction)
        out(f"   a = {a:4.1f}: q.k / sqrt(D) = {scores[a]:8.3f}; cosine similarity stays "
            f"{(a * direction) @ (a * direction) / (a * a):.0f}")
    out("   no fixed interval: doubling both lengths multiplies the score by four")
    return scores


def spread(out):
    """Fact 2: the standard deviation of scaled scores for entries of two sizes and three widths."""
    rng = np.random.default_rng(0)
    out("2. Random q, k with entries of standard deviation s, 20,000 pairs per row:")
    stds = {}
    for s in (1.0, 3.0):
        for D in (4, 64, 256):
            q = s * rng.standard_normal((20_000, D))
            k = s * rng.standard_normal((20_000, D))
            scaled = np.einsum("nd,nd->n", q, k) / math.sqrt(D)
            stds[(s, D)] = float(scaled.std())
            out(f"   s = {s:.0f}, D = {D:3d}: scaled scores std {stds[(s, D)]:5.2f} (s^2 = {s * s:.0f}), "
                f"largest |score| {np.abs(scaled).max():6.2f}")
    out("   sqrt(D) removes the width's effect; the entries' size passes straight through")
    return stds


def saturation(out):
    """Fact 3: softmax of [g, 0] and the gradient of its first weight for growing gaps g."""
    out("3. Two keys with scores [g, 0]: weights [w, 1 - w], w = sigmoid(g); d w / d g = w (1 - w)")
    rows = {}
    for gap in (1 / math.sqrt(2), 5.0, 20.0):
        weights, cache = softmax_forward(np.array([gap, 0.0]))
        d_scores = softmax_backward(np.array([1.0, 0.0]), cache)     # gradient of w wrt the scores
        rows[gap] = (weights, d_scores)
        out(f"   g = {gap:6.3f}: weights {vec(weights, 9)}, d w / d g = {d_scores[0]:.3e}")
    out("   the tutorial's 0.707 still mixes; a gap of 20 is one-hot to 9 decimals and passes "
        "almost no gradient")
    return rows


def run(out=print):
    return {"scores": unbounded(out), "stds": spread(out), "saturation": saturation(out)}


if __name__ == "__main__":
    run()
