"""A deep stack without residuals: each layer replaces its input, and the input is lost on the way.

The first article: if every layer "completely replaces its input, important
information and gradients can hardly pass"; y = x + f(x) keeps a direct path
(the overview: residuals "improve gradient propagation in deep networks").
The same npformer Pre-Norm blocks (width 32, 4 heads, the default
initialisation) are stacked 1 to 64 deep, once as they are and once with both
residual additions removed: y = FFN(Norm2(Attn(Norm1(x)))).
1. The extreme case, by hand: with every sub-layer's output projection zero,
   the residual stack is exactly the identity (and passes the gradient
   unchanged); the stack without residuals outputs zero and passes nothing.
2. Random weights: how much the output still depends on the input, how far
   the positions' vectors stay apart, and how much gradient reaches the input.
"""
from typing import NamedTuple

import numpy as np

from npformer import Cache, DecoderConfig, DecoderLM, Module, causal_mask

N, WIDTH = 8, 32


class WithoutResidualsCache(NamedTuple):
    """What the block without residuals keeps for its backward: its four parts' caches."""

    norm1: Cache
    attn: Cache
    norm2: Cache
    ffn: Cache


class WithoutResiduals(Module):
    """A Pre-Norm block's own parts with the two residual additions taken out."""

    def __init__(self, block):
        self.norm1, self.attn, self.norm2, self.ffn = block.norm1, block.attn, block.norm2, block.ffn

    def forward(self, x, mask=None):
        a, norm1 = self.norm1.forward(x)
        attended, attn = self.attn.forward(a, mask)          # a block would add x here
        f, norm2 = self.norm2.forward(attended)
        y, ffn = self.ffn.forward(f)                          # ... and attended here
        return y, WithoutResidualsCache(norm1, attn, norm2, ffn)

    def backward(self, d_y, cache):
        d_attended = self.norm2.backward(self.ffn.backward(d_y, cache.ffn), cache.norm2)
        return self.norm1.backward(self.attn.backward(d_attended, cache.attn), cache.norm1)


def stacks(depth, seed=0):
    """(the Pre-Norm blocks, the same blocks without residuals) of a float64 decoder."""
    config = DecoderConfig(d_model=WIDTH, n_heads=4, n_layers=depth, max_len=N)
    blocks = DecoderLM(config, np.random.default_rng(seed), dtype=np.float64).blocks
    return blocks, [WithoutResiduals(block) for block in blocks]


def forward_backward(layers, x, d_out, mask):
    """Output of the stack and the gradient reaching its input for the upstream ``d_out``."""
    caches = []
    for layer in layers:
        x, cache = layer.forward(x, mask)
        caches.append(cache)
    d_x = d_out
    for layer, cache in zip(reversed(layers), reversed(caches)):
        d_x = layer.backward(d_x, cache)
    return x, d_x


def silent_sublayers(out, x, d_out, mask):
    """Part 1: four blocks with zeroed output projections, with and without residuals."""
    with_res, without = stacks(4)
    for block in with_res:                                   # zero every write into the stream
        for p in (block.attn.out.weight, block.ffn.down.weight, block.ffn.down.bias):
            p.data[...] = 0.0
    y_res, dx_res = forward_backward(with_res, x, d_out, mask)
    y_not, dx_not = forward_backward(without, x, d_out, mask)
    out("1. Four blocks whose output projections are zero (Wo, W2 and b2 = 0):")
    out(f"   with residuals:    output - input up to {np.abs(y_res - x).max():.1e}, "
        f"input gradient - upstream up to {np.abs(dx_res - d_out).max():.1e}")
    out(f"   without residuals: output up to {np.abs(y_not).max():.1e}, "
        f"input gradient up to {np.abs(dx_not).max():.1e}")
    return {"input": x, "upstream": d_out, "residual_output": y_res, "residual_grad": dx_res,
            "plain_output": y_not, "plain_grad": dx_not}


def measure(layers, x, d_out, mask, nudge):
    """Input effect, spread of the positions and gradient ratio of one stack."""
    y, d_x = forward_backward(layers, x, d_out, mask)
    y_nudged, _ = forward_backward(layers, x + nudge, d_out, mask)
    return {"input_effect": float(np.abs(y_nudged - y).max() / np.abs(nudge).max()),
            "spread": float(np.linalg.norm(y - y.mean(axis=1, keepdims=True)) / np.linalg.norm(y)),
            "grad_ratio": float(np.linalg.norm(d_x) / np.linalg.norm(d_out))}


def run(out=print):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, N, WIDTH))                  # [B, N, d]
    d_out = rng.standard_normal(x.shape)                    # a random upstream gradient
    mask = causal_mask(N)
    results = {"silent": silent_sublayers(out, x, d_out, mask)}
    nudge = np.zeros_like(x)
    nudge[0, 0] = 0.1 * rng.standard_normal(WIDTH)          # change position 0's input a little
    out("2. Random weights. effect: output change / input change at position 0; spread: how far "
        "the positions' vectors are apart (0 = all equal); gradient: |d input| / |d output|")
    for depth in (1, 4, 16, 64):
        with_res, without = stacks(depth)
        row = {"residual": measure(with_res, x, d_out, mask, nudge),
               "plain": measure(without, x, d_out, mask, nudge)}
        results[depth] = row
        for name in ("residual", "plain"):
            m = row[name]
            out(f"   depth {depth:2d}, {'with' if name == 'residual' else 'without':7} residuals: "
                f"effect {m['input_effect']:.1e}, spread {m['spread']:.1e}, gradient {m['grad_ratio']:.1e}")
    out("   without residuals the positions collapse onto one vector and the input's trace fades;")
    out("   with them the input still shows at depth 64 and the gradient arrives at full size")
    return results


if __name__ == "__main__":
    run()
