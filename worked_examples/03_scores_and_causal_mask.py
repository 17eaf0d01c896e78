"""All positions at once: the 4 x 4 score matrix Q K^T, the causal table, and a padding mask.

Four positions of eight numbers each (X is 4 x 8) go through one attention
head. Row i of the score matrix holds position i's match with every position
j. The causal mask lets position i read j only when j <= i (itself included);
a future score becomes -inf, so its softmax weight is exactly 0. Left padding
is removed the same way, with a mask over the keys.
"""
import numpy as np

from npformer import MultiHeadAttention, causal_mask, padding_mask, softmax
from npformer.worked import vec


def run(out=print):
    rng = np.random.default_rng(3)
    N, d = 4, 8
    x = rng.standard_normal((1, N, d)).astype(np.float32)          # [B, N, d] = [1, 4, 8]
    attn = MultiHeadAttention(d, n_heads=1, rng=rng)                 # one head of width D = 8
    allowed = causal_mask(N)                                         # [N, N], True = may read

    out(f"1. X has shape {list(x.shape[1:])}: {N} positions of {d} numbers. "
        f"One head projects it to Q, K, V of shape [4, 8].")
    _, cache = attn.forward(x, mask=allowed)
    q, k = cache.attn.q[0, 0], cache.attn.k[0, 0]                    # [N, D] each
    scores = q @ k.T / np.sqrt(k.shape[-1])                          # [N, N]
    out(f"   score matrix Q K^T / sqrt(8), shape {list(scores.shape)}; "
        f"row i = position i reading every position j:")
    for i, row in enumerate(scores):
        out(f"     row {i}: {vec(row)}")

    out("2. The causal table: may position i (row) read position j (column)?")
    out("          " + "  ".join(f"j={j}" for j in range(N)))
    for i, row in enumerate(allowed):
        out(f"     i={i}  " + "  ".join("yes" if a else " no" for a in row))
    readable = allowed.sum(axis=1)
    out(f"   positions each row may read: {readable.tolist()} (itself and everything before it)")

    masked_scores = np.where(allowed, scores, -np.inf)
    out(f"   row 1 with the future set to -inf: {vec(masked_scores[1])}; exp(-inf) = 0")
    weights = cache.weights[0, 0]                                    # [N, N] from the attention call
    out("   weights after the softmax (the attention call's own result):")
    for i, row in enumerate(weights):
        out(f"     row {i}: {vec(row)}   sum {row.sum():.3f}")
    same = bool(np.allclose(weights, softmax(scores, mask=allowed), atol=1e-6))
    out(f"   equal to softmax of the score matrix with the mask applied: {same}")

    out("3. Padding: the same four slots, but the first two are padding (left-padded request).")
    real = padding_mask(lengths=[2], n=N, side="left")               # [B, 1, 1, N]
    both = allowed & real                                            # causal AND a real token
    _, padded = attn.forward(x, mask=both)
    padded_weights = padded.weights[0, 0]
    out(f"   real tokens: {real[0, 0, 0].tolist()}")
    for i, row in enumerate(padded_weights):
        out(f"     row {i}: {vec(row)}")
    out("   the padding columns get weight 0 although they lie in the past; the padding rows "
        "read nothing (all-zero weights, no NaN)")
    return {"scores": scores, "causal": allowed, "readable": readable, "weights": weights,
            "weights_match_masked_softmax": same, "padded_weights": padded_weights}


if __name__ == "__main__":
    run()
