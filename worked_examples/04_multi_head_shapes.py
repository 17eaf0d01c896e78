"""Multi-head shapes: width 8 and 2 heads give head width 4; X [B, N, 8] -> Q [B, 2, N, 4] -> [B, N, 8].

Splitting into heads reorganises the features of every position; it does not
cut the sentence in two. Each head computes its own [N, N] weight table over
all positions, the head outputs are concatenated back to width 8, and the
output matrix Wo mixes them.
"""
import numpy as np

from npformer import MultiHeadAttention, causal_mask
from npformer.worked import vec


def run(out=print):
    rng = np.random.default_rng(5)
    B, N, d, H = 2, 5, 8, 2
    attn = MultiHeadAttention(d, n_heads=H, rng=rng)
    x = rng.standard_normal((B, N, d)).astype(np.float32)
    y, cache = attn.forward(x, mask=causal_mask(N))

    out(f"1. width d = {d}, heads H = {H} -> head width D = d / H = {attn.head_dim}")
    projected = attn.qkv(x)                                    # [B, N, 3d]: Q | K | V side by side
    shapes = {
        "x": x.shape, "qkv": projected.shape, "q": cache.attn.q.shape, "k": cache.attn.k.shape,
        "v": cache.attn.v.shape, "weights": cache.weights.shape, "merged": cache.out.x.shape,
        "output": y.shape,
    }
    rows = [("input X", "[B, N, d]", "x"), ("Q, K, V from one projection", "[B, N, 3d]", "qkv"),
            ("Q split into heads", "[B, H, N, D]", "q"), ("K split into heads", "[B, H, N, D]", "k"),
            ("V split into heads", "[B, H, N, D]", "v"),
            ("weights: one N x N table per head", "[B, H, N, N]", "weights"),
            ("heads concatenated again", "[B, N, H*D]", "merged"), ("after Wo", "[B, N, d]", "output")]
    for text, names, key in rows:
        out(f"   {text:36} {names:14} = {list(shapes[key])}")

    out("2. Heads split the features, not the positions:")
    q_all, D = projected[..., :d], attn.head_dim                # the Q part [B, N, d]; head width
    head_is_slice = [bool(np.array_equal(cache.attn.q[:, h], q_all[..., h * D:(h + 1) * D]))
                     for h in range(H)]
    out(f"   head 0 = features 0..3 of Q at all {N} positions: {head_is_slice[0]}; "
        f"head 1 = features 4..7: {head_is_slice[1]}")
    for h in range(H):
        out(f"   head {h}, last row of its weight table: {vec(cache.weights[0, h, -1])}")
    out("   each head reads all positions, with its own weights")

    out(f"3. Wo ({list(attn.out.weight.shape)}) mixes the heads: silence head 1's half of the "
        f"merged vector")
    merged = cache.out.x.copy()
    merged[..., D:] = 0
    changed = attn.out(merged)[0, -1] != y[0, -1]
    out(f"   output features that change at the last position: {int(changed.sum())} of {d} "
        f"(every one: each output feature reads both heads)")
    return {"head_dim": attn.head_dim, "shapes": shapes, "head_is_slice": head_is_slice,
            "features_changed_by_one_head": int(changed.sum())}


if __name__ == "__main__":
    run()
