"""Attention by hand: q = [1, 0] against two keys, weights about [0.670, 0.330], output [1.340, 1.321].

The first article's hand calculation, step by step with npformer's softmax,
then in one call to ``attention_forward`` (the same function every model in
npformer uses). The article writes the weighted sum with "≈", and rightly: its
weights are printed rounded to 0.670 and 0.330, while its output [1.340, 1.321]
comes from the unrounded ones (0.33024 x 4 = 1.32095, which is 1.321 to three
decimals; the rounded 0.330 x 4 would give 1.320). Then the second key is
changed to [2, 0] and the mix moves.
Last, why the scores are divided by sqrt(D): without it their spread grows
with the head width.
"""
import numpy as np

from npformer import attention_forward, softmax
from npformer.worked import vec


def attend(query, keys, values, out):
    """One query against a few keys, printed step by step; returns the steps as a dict."""
    D = keys.shape[-1]
    scores = keys @ query                                  # one dot product per key: [M]
    scaled = scores / np.sqrt(D)
    weights = softmax(scaled)                              # npformer.softmax
    out(f"   scores q.k = {vec(scores)}; divided by sqrt({D}) = {np.sqrt(D):.3f}: {vec(scaled)}")
    out(f"   exp of the scaled scores = {vec(np.exp(scaled))}; "
        f"softmax = each / their sum = {vec(weights)}")
    # The same thing as one attention call: q [B, H, N, D], k and v [B, H, M, D].
    mixed, cache = attention_forward(query[None, None, None], keys[None, None], values[None, None])
    output = mixed[0, 0, 0]
    # four decimals, so the printed sum adds up (three would lose the last digit, see run)
    terms = " + ".join(f"{w:.4f} x {vec(v, 0)}" for w, v in zip(cache.weights[0, 0, 0], values))
    out(f"   output = {terms} = {vec(output)}")
    return {"scores": scores, "scaled": scaled, "exp": np.exp(scaled),
            "weights": cache.weights[0, 0, 0], "output": output}


def run(out=print):
    query = np.array([1.0, 0.0])
    keys = np.array([[1.0, 0.0], [0.0, 1.0]])       # key A matches q, key B is orthogonal to it
    values = np.array([[2.0, 0.0], [0.0, 4.0]])     # what A and B hand over when read

    out(f"1. q = {vec(query, 0)}, keys A = {vec(keys[0], 0)}, B = {vec(keys[1], 0)}; "
        f"values A = {vec(values[0], 0)}, B = {vec(values[1], 0)}")
    first = attend(query, keys, values, out)
    out("   a mix: A weighs most, yet B still contributes its share")
    first["rounded_sum"] = np.round(first["weights"], 3) @ values
    w_b = first["weights"][1]
    out("   the article writes this sum with ≈: its [1.340, 1.321] comes from the unrounded weights,")
    out(f"   {w_b:.5f} x 4 = {4 * w_b:.5f}; the weights as printed, 0.670 and 0.330, would give "
        f"{vec(first['rounded_sum'])}")

    changed = keys.copy()
    changed[1] = [2.0, 0.0]
    out(f"2. The second key changed to {vec(changed[1], 0)} (values unchanged): "
        f"it now matches q more strongly.")
    second = attend(query, changed, values, out)
    out("   the weights swap sides, and the output moves towards B's value")

    out("3. Why divide by sqrt(D): spread of q.k for random q, k with unit-variance entries.")
    rng = np.random.default_rng(0)
    spread = {}
    for D in (2, 64, 512):
        q = rng.standard_normal((5000, D))
        k = rng.standard_normal((5000, D))
        dots = np.einsum("nd,nd->n", q, k)           # 5,000 independent dot products
        spread[D] = (dots.std(), (dots / np.sqrt(D)).std())
        out(f"   D = {D:3d}: std of q.k = {spread[D][0]:6.2f} (sqrt(D) = {np.sqrt(D):5.2f}); "
            f"after dividing by sqrt(D): {spread[D][1]:.2f}")
    scores = rng.standard_normal((8, 512)) @ rng.standard_normal(512)   # 8 keys, one query
    peak_raw = softmax(scores).max()
    peak_scaled = softmax(scores / np.sqrt(512)).max()
    out(f"   8 keys, D = 512: largest softmax weight {peak_raw:.3f} unscaled, "
        f"{peak_scaled:.3f} scaled (unscaled scores make softmax nearly one-hot)")
    return {"first": first, "changed_key": second, "spread": spread,
            "peak_unscaled": float(peak_raw), "peak_scaled": float(peak_scaled)}


if __name__ == "__main__":
    run()
