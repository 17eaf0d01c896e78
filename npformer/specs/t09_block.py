"""Pre-Norm and Post-Norm blocks (``t09_block.py``), as the engines know them.

Each block as a layer whose weights are arguments (what the grader judges exercise 09 on, on
drawn inputs), the gradient-check cases of both blocks, exercise 09 and its claims (a residual
carries the gradient; causality). Mistakes: ``t09_block.json``.
"""
from __future__ import annotations

import numpy as np

from ..t04_attention import padding_mask
from ..t09_block import BlockCache, BlockConfig, build_block
from . import claims
from .draw import (Example, alternating, arrays, assume_varied, block_recipe, key_mask, sampled, size, st,
                   weights_of)
from .layered import block_config, all_parameters, grads, loaded, rng, weight_names
from .case_inputs import normal, shape
from .registry import Spec, lookup

spec = Spec("t09_block.py")
BLOCK = ("t09_block.PreNormBlock.forward", "t09_block.PreNormBlock.backward",
         "t09_block.PostNormBlock.forward", "t09_block.PostNormBlock.backward")
WEIGHTS = "then one array per parameter, in the module's named_parameters() order"


def build_prenorm(d, recipe, dtype):
    """npformer's Pre-Norm block of width ``d`` as ``recipe`` describes it."""
    return lookup("t09_block.build_block")(block_config(d, recipe, prenorm=True), rng(), dtype)


def build_postnorm(d, recipe, dtype):
    """npformer's Post-Norm block of width ``d`` as ``recipe`` describes it."""
    return lookup("t09_block.build_block")(block_config(d, recipe, prenorm=False), rng(), dtype)


def _block_forward(build, x, weights, recipe, mask):
    block, params = loaded(build, all_parameters, x.shape[-1], recipe, weights, x.dtype)
    out, cache = block.forward(x, mask)
    return out, (block, params, cache)


def prenorm_block_forward(x, *weights, n_heads=1, n_kv_heads=None, norm="layernorm", ffn="gelu",
                          ffn_hidden=None, ffn_bias=True, attn_bias=False, causal=True, mask=None):
    """x [B, N, d] -> (x + Attn(Norm1(x)) then + FFN(Norm2(.)), cache)."""
    recipe = dict(n_heads=n_heads, n_kv_heads=n_kv_heads, norm=norm, ffn=ffn, ffn_hidden=ffn_hidden,
                  ffn_bias=ffn_bias, attn_bias=attn_bias, causal=causal)
    return _block_forward(build_prenorm, x, weights, recipe, mask)


def postnorm_block_forward(x, *weights, n_heads=1, n_kv_heads=None, norm="layernorm", ffn="gelu",
                           ffn_hidden=None, ffn_bias=True, attn_bias=False, causal=True, mask=None):
    """x [B, N, d] -> (Norm2(h + FFN(h)) with h = Norm1(x + Attn(x)), cache)."""
    recipe = dict(n_heads=n_heads, n_kv_heads=n_kv_heads, norm=norm, ffn=ffn, ffn_hidden=ffn_hidden,
                  ffn_bias=ffn_bias, attn_bias=attn_bias, causal=causal)
    return _block_forward(build_postnorm, x, weights, recipe, mask)


def block_backward(d_out, cache):
    """-> (d_x, d_weights...)."""
    block, params, inner = cache
    return (block.backward(d_out, inner),) + grads(params)


def block_inputs(draw, build):
    """x [B, N, d] (d of 3 or 4: a LayerNorm of 2 features is constant, of 1 undefined, and
    each row alternates its signs, so no row is constant) and the weights of a block:
    LayerNorm or RMSNorm, a GELU or ReLU FFN, heads and key/value heads (GQA),
    biases or none; causal or not, a key padding mask or none."""
    B, N, d = draw(size(1, 2)), draw(size(1, 3)), draw(sampled([3, 4]))
    recipe = {**block_recipe(draw, d), "causal": draw(st().booleans())}
    x = alternating(draw(arrays((B, N, d))))
    assume_varied(x)
    names, weights = weights_of(draw, weight_names(build, all_parameters, d, recipe))
    mask = key_mask(draw, B, N)
    recipe["mask"] = None if mask is None else mask[:, None, None, :]
    return Example(("x",) + names, (x,) + weights, recipe)


@spec.layer("prenorm_block", "a Pre-Norm block: h = x + Attn(Norm1(x)), y = h + FFN(Norm2(h))",
            f"prenorm_block_forward(x, *weights, n_heads, n_kv_heads, norm, ffn, ffn_hidden, ffn_bias, "
            f"attn_bias, causal, mask=None) -> (y, cache); {WEIGHTS}",
            (prenorm_block_forward, block_backward), "(d_x, d_weights...)", BLOCK)
def prenorm_block_inputs(draw):
    """``block_inputs`` of a Pre-Norm block."""
    return block_inputs(draw, build_prenorm)


@spec.layer("postnorm_block", "a Post-Norm block: h = Norm1(x + Attn(x)), y = Norm2(h + FFN(h))",
            "postnorm_block_forward(x, *weights, ...) -> (y, cache), as prenorm_block",
            (postnorm_block_forward, block_backward), "(d_x, d_weights...)", BLOCK)
def postnorm_block_inputs(draw):
    """``block_inputs`` of a Post-Norm block."""
    return block_inputs(draw, build_postnorm)


# -- gradient-check cases ---------------------------------------------------------------------------
def block_case(prenorm, rng, size):
    B, N, d, H = shape(size)
    config = BlockConfig(d_model=d, n_heads=H, prenorm=prenorm, ffn=("gelu", "relu", "swiglu")[size],
                         rope=size == 2)
    # the mask and the positions a model hands its blocks: left padding, each row's own offsets
    options = [{}, {"mask": padding_mask(np.full(B, N - 1), N, side="left")},
               {"mask": padding_mask(np.full(B, N - 1), N), "positions": np.arange(N)[None] + np.arange(B)[:, None]}]
    return build_block(config, rng, np.float64), (normal(rng, B, N, d),), options[size]


@spec.case("PreNormBlock")
def prenorm_block_case(rng, size):
    return block_case(True, rng, size)


@spec.case("PostNormBlock")
def postnorm_block_case(rng, size):
    return block_case(False, rng, size)


spec.exercise(9, "block", "Pre-Norm and Post-Norm blocks (residuals)",
              "tutorial part 1, FFN, residuals and normalisation; tutorial part 2 §11, residual connections",
              backward=("t09_block.py:PreNormBlock.backward", "t09_block.py:PostNormBlock.backward"),
              forward=("t09_block.py:PreNormBlock.forward", "t09_block.py:PostNormBlock.forward"),
              checks=(("PreNormBlock", (0, 1, 2)), ("PostNormBlock", (0, 1, 2)),
                      ("DecoderLM (Mixtral, pooled)", (1,))), components=("prenorm_block", "postnorm_block"))


def zero_output_projections(*linears):
    """Zero the weights and biases of output projections: the sub-layer then outputs 0."""
    for linear in linears:
        linear.weight.data[...] = 0
        if linear.bias is not None:
            linear.bias.data[...] = 0


@spec.claim("block", "a residual carries the gradient: with silent sub-layers a Pre-Norm block has d_x = d_out")
def residual_carries_the_gradient(L, R):
    g = claims.rng()
    block = L.t09_block.build_block(L.t09_block.BlockConfig(d_model=8, n_heads=2), g, np.float64)
    zero_output_projections(block.attn.out, block.ffn.down)
    out, cache = block.forward(g.standard_normal((2, 4, 8)))
    G = g.standard_normal(out.shape)
    claims.close("d_x", block.backward(G, cache), G, 1e-12)


@spec.claim("block", "causal: the gradient from position 1 reaches no input after it (Pre- and Post-Norm)")
def causal_block_gradient(L, R):
    g = claims.rng()
    for prenorm in (True, False):
        block = L.t09_block.build_block(L.t09_block.BlockConfig(d_model=8, n_heads=2, prenorm=prenorm), g,
                                        np.float64)
        out, cache = block.forward(g.standard_normal((2, 4, 8)))
        claims.zero("d_x after position 1",
                    block.backward(claims.upstream_at(out.shape, (slice(None), 1), g), cache)[:, 2:])


# -- a convention of whole blocks: the parallel residual ------------------------------------------
def parallel_forward(self, x, mask=None, positions=None, kv=None, **ffn_inputs):
    """GPT-J's and GPT-NeoX's block: y = x + Attn(Norm1(x)) + FFN(Norm2(x)), both branches read x."""
    a, norm1 = self.norm1.forward(x)
    attended, attn = self.attn.forward(a, mask, positions, kv)
    f, norm2 = self.norm2.forward(x)
    fed, ffn = self.ffn.forward(f, **ffn_inputs)
    return x + attended + fed, BlockCache(norm1, attn, norm2, ffn)


def parallel_backward(self, d_out, cache, **ffn_grads):
    """d_x = d_out + both branches' gradients, each through its own norm."""
    d_f = self.ffn.backward(d_out, cache.ffn, **ffn_grads)
    d_a = self.attn.backward(d_out, cache.attn)
    return d_out + self.norm1.backward(d_a, cache.norm1) + self.norm2.backward(d_f, cache.norm2)


spec.module_convention({"residual": "parallel"}, lambda kind, config: not kind.endswith("_mlp") and config.prenorm,
                       lambda chosen: {"npformer.t09_block.PreNormBlock.forward": parallel_forward,
                                       "npformer.t09_block.PreNormBlock.backward": parallel_backward})
