"""Norms: LayerNorm [1, 3] -> [-1, 1], RMSNorm [1, 3] -> [0.447, 1.342]; the Pre-Norm block.

LayerNorm subtracts the mean (2) and divides by the standard deviation (1);
RMSNorm only divides by the root mean square sqrt((1 + 9) / 2) = sqrt(5).
Both with eps = 0 and gamma = 1, as in the tutorial; then with the usual eps.
Last, a Pre-Norm block is taken apart: h = x + Attn(Norm(x)),
y = h + FFN(Norm(h)), and compared with a Post-Norm block.

The two articles draw the norm in different places, and both places are in
use (the overview itself says models place it differently). The main article
teaches Pre-Norm (normalise before each sub-layer, as GPT-2 and Llama do); the
overview's simplified block diagram (Self-Attention -> "residual connection and
normalisation" -> MLP -> "residual connection and normalisation"), read
literally, normalises after each residual sum: Post-Norm, the layout of the
2017 Transformer and of BERT. npformer has both: ``PreNormBlock`` (the default) and ``PostNormBlock``
(``DecoderConfig(prenorm=False)``).
"""
import numpy as np

from npformer import DecoderConfig, LayerNorm, RMSNorm, build_block, causal_mask
from npformer.worked import vec


def post_norm(inputs, mask, out):
    """The overview article's block diagram as npformer's PostNormBlock, checked against its formula."""
    out("3. Two placements: the main article teaches Pre-Norm (above); the overview's simplified")
    out("   block diagram puts 'residual connection and normalisation' after attention and after")
    out("   the MLP: Post-Norm, h = Norm1(x + Attn(x)); y = Norm2(h + FFN(h)) (2017 Transformer, BERT).")
    out("   npformer has both: PreNormBlock (the default) and PostNormBlock (DecoderConfig(prenorm=False))")
    post = build_block(DecoderConfig(prenorm=False), np.random.default_rng(2), np.float64)
    y_post = post(inputs, mask)
    h = post.norm1(inputs + post.attn(inputs, mask))
    by_hand = post.norm2(h + post.ffn(h))
    gap = float(np.abs(y_post - by_hand).max())
    out(f"   the Post-Norm block vs that formula from its own pieces: largest difference {gap:.1e}")
    return gap, y_post


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

    post_gap, y_post = post_norm(inputs, mask, out)
    pre_std, post_std = float(y.std(axis=-1).mean()), float(y_post.std(axis=-1).mean())
    out(f"   input scale: std {inputs.std(axis=-1).mean():.2f} per position")
    out(f"   Pre-Norm output keeps the residual stream's scale: std {pre_std:.2f} per position")
    out(f"   Post-Norm (norm after each sum) rescales it: std {post_std:.2f}, "
        f"mean {abs(float(y_post.mean(axis=-1).mean())):.2f}")
    return {"layer_norm": layer_norm, "rms_norm": rms_norm, "layer_norm_eps": layer_eps,
            "rms_norm_eps": rms_eps, "prenorm_gap": prenorm_gap,
            "prenorm_std": pre_std, "postnorm_std": post_std, "postnorm_output": y_post,
            "postnorm_gap": post_gap}


if __name__ == "__main__":
    run()
