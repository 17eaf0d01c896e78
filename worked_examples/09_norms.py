"""Norms: LayerNorm [1, 3] -> [-1, 1], RMSNorm [1, 3] -> [0.447, 1.342]; the Pre-Norm block.

LayerNorm subtracts the mean (2) and divides by the standard deviation (1);
RMSNorm only divides by the root mean square sqrt((1 + 9) / 2) = sqrt(5).
Both with eps = 0 and gamma = 1, as in the tutorial; then with the usual eps.
Last, a Pre-Norm block is taken apart: h = x + Attn(Norm(x)),
y = h + FFN(Norm(h)), and compared with a Post-Norm block.
"""
import numpy as np

from npformer import DecoderConfig, LayerNorm, RMSNorm, causal_mask
from npformer.examples import vec
from npformer.model import build_block


def run(out=print):
    x = np.array([1.0, 3.0])
    out(f"1. x = {vec(x, 0)}: mean {x.mean():.0f}, standard deviation {x.std():.0f}, "
        f"root mean square sqrt(5) = {np.sqrt(np.mean(x * x)):.3f}")
    layer_norm, layer_cache = LayerNorm(2, eps=0.0, dtype=np.float64).forward(x)
    rms_norm, rms_cache = RMSNorm(2, eps=0.0, dtype=np.float64).forward(x)
    out(f"   LayerNorm (eps 0, gamma 1, beta 0): {vec(layer_norm)}   "
        f"(1 / std used: {float(layer_cache.rstd[0]):.3f})")
    out(f"   RMSNorm   (eps 0, gamma 1):         {vec(rms_norm)}   "
        f"(1 / rms used: {float(rms_cache.rstd[0]):.3f})")
    out("   they differ because RMSNorm does not subtract the mean")
    layer_eps = LayerNorm(2, dtype=np.float64)(x)
    rms_eps = RMSNorm(2, dtype=np.float64)(x)
    out(f"   with the default eps (1e-5, 1e-6): {vec(layer_eps, 6)} and {vec(rms_eps, 6)}; "
        f"eps only guards tiny scales")

    out("2. The Pre-Norm block, taken apart: h = x + Attn(Norm1(x)); y = h + FFN(Norm2(h))")
    rng = np.random.default_rng(2)
    block = build_block(DecoderConfig(), rng, np.float64)       # the tiny decoder's block
    inputs = 10 * rng.standard_normal((1, 5, 8))                  # [B, N, d], deliberately large
    mask = causal_mask(5)
    y = block(inputs, mask)
    h = inputs + block.attn(block.norm1(inputs), mask)
    by_hand = h + block.ffn(block.norm2(h))
    prenorm_gap = float(np.abs(y - by_hand).max())
    out(f"   the block's output vs the formula from its own pieces: largest difference "
        f"{prenorm_gap:.1e}")

    post = build_block(DecoderConfig(prenorm=False), np.random.default_rng(2), np.float64)
    y_post = post(inputs, mask)
    pre_std, post_std = float(y.std(axis=-1).mean()), float(y_post.std(axis=-1).mean())
    out(f"   input scale: std {inputs.std(axis=-1).mean():.2f} per position")
    out(f"   Pre-Norm output keeps the residual stream's scale: std {pre_std:.2f} per position")
    out(f"   Post-Norm (norm after each sum) rescales it: std {post_std:.2f}, "
        f"mean {abs(float(y_post.mean(axis=-1).mean())):.2f}")
    return {"layer_norm": layer_norm, "rms_norm": rms_norm, "layer_norm_eps": layer_eps,
            "rms_norm_eps": rms_eps, "prenorm_gap": prenorm_gap,
            "prenorm_std": pre_std, "postnorm_std": post_std, "postnorm_output": y_post}


if __name__ == "__main__":
    run()
