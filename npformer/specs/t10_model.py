"""The decoder-only model and its tied head (``t10_model.py``), as the engines know them.

The whole DecoderLM as a layer whose weights are arguments (what exercise 10 is judged on, on
drawn inputs), the gradient-check cases of the head and the model, exercise 10 and its claims
(causality, one tied Parameter). Mistakes: ``t10_model.json``.
"""
from __future__ import annotations

import numpy as np

from ..t01_embedding import Embedding
from ..t10_model import DecoderConfig, DecoderLM, TiedHead
from . import claims
from .draw import Example, assume_varied, block_recipe, ids, key_mask, sampled, size, st, weights_of, width
from .layered import all_parameters, grads, loaded, rng, weight_names
from .case_inputs import left_padded, normal, shape
from .registry import Spec, lookup
from .t09_block import BLOCK, WEIGHTS

spec = Spec("t10_model.py")
MODEL = ("t10_model.TiedHead.forward", "t10_model.TiedHead.backward", "t10_model.DecoderLM.backward")


def build_decoder(d, recipe, dtype):
    """npformer's DecoderLM of width ``d`` as ``recipe`` describes it."""
    config = lookup("t10_model.DecoderConfig")(d_model=d, **{k: v for k, v in recipe.items() if k != "key_mask"})
    return lookup("t10_model.DecoderLM")(config, rng(), dtype)


def decoder_lm_forward(ids, *weights, vocab_size=5, max_len=4, n_heads=1, n_kv_heads=None, n_layers=1,
                       positions="learned", norm="layernorm", ffn="gelu", ffn_hidden=None, prenorm=True,
                       tie_embeddings=True, attn_bias=False, ffn_bias=True, key_mask=None):
    """ids [B, N] -> (logits [B, N, V], cache) of a DecoderLM (d from the token table)."""
    recipe = dict(vocab_size=vocab_size, max_len=max_len, n_heads=n_heads, n_kv_heads=n_kv_heads,
                  n_layers=n_layers, positions=positions, norm=norm, ffn=ffn, ffn_hidden=ffn_hidden,
                  prenorm=prenorm, tie_embeddings=tie_embeddings, attn_bias=attn_bias, ffn_bias=ffn_bias)
    table = weights[0]
    model, params = loaded(build_decoder, all_parameters, table.shape[-1], recipe, weights, table.dtype)
    out, cache = model.forward(ids, key_mask)
    return out, (model, params, cache)


def decoder_lm_backward(d_out, cache):
    """-> (None for the ids, d_weights...)."""
    model, params, inner = cache
    model.backward(d_out, inner)
    return (None,) + grads(params)


@spec.layer("decoder_lm", "the decoder-only model: embeddings, blocks, final norm, (tied) head",
            f"decoder_lm_forward(ids, *weights, vocab_size, max_len, n_heads, ..., key_mask=None) -> "
            f"(logits, cache); {WEIGHTS}", (decoder_lm_forward, decoder_lm_backward), "(None, d_weights...)",
            MODEL + BLOCK)
def decoder_lm_inputs(draw):
    """Token ids [B, N] of a vocabulary of 3 to 5 (ids repeat) and the weights of a DecoderLM of
    one or two Pre- or Post-Norm layers: learned positions, RoPE or none, a tied head or its
    own, the block kinds of a block's inputs; a key mask or none."""
    positions = draw(sampled(["learned", "rope", "none"]))
    B, N, d, V = draw(size(1, 2)), draw(size(1, 3)), width(draw, positions), draw(st().integers(3, 5))
    recipe = {**block_recipe(draw, d, positions), "vocab_size": V, "max_len": N,
              "n_layers": draw(sampled([2, 1])), "positions": positions, "prenorm": draw(st().booleans()),
              "tie_embeddings": draw(sampled([False, True]))}
    tokens = draw(ids((B, N), V))
    names, weights = weights_of(draw, weight_names(build_decoder, all_parameters, d, recipe))
    embedded = weights[0][tokens] + (weights[1][:N] if recipe["positions"] == "learned" else 0)
    assume_varied(embedded)
    return Example(("ids",) + names, (tokens,) + weights, {**recipe, "key_mask": key_mask(draw, B, N)})


@spec.case("TiedHead")
def tied_head_case(rng, size):
    B, N, d, H = shape(size)
    return TiedHead(Embedding(11, d, rng)), (normal(rng, B, N, d),), {}


@spec.case("DecoderLM")
def decoder_case(rng, size):
    B, N, d, H = shape(size)
    config = [DecoderConfig(d_model=d, n_heads=H, vocab_size=13),
              DecoderConfig.gpt2(d_model=d, n_heads=H, vocab_size=13, n_layers=2),
              DecoderConfig.llama(d_model=d, n_heads=H, n_kv_heads=2, vocab_size=13, n_layers=2)][size]
    return DecoderLM(config, rng), (rng.integers(0, 13, (B, N)),), {"key_mask": left_padded(B, N)}


@spec.case("DecoderLM (row positions)")
def decoder_row_positions_case(rng, size):
    # positions [B, N]: each row its own positions (left padding shifts a row's start)
    B, N, d, H = shape(size)
    config = [DecoderConfig(d_model=d, n_heads=H, vocab_size=13, max_len=N + 2),
              DecoderConfig.gpt2(d_model=d, n_heads=H, vocab_size=13, max_len=N + 2),
              DecoderConfig.llama(d_model=d, n_heads=H, n_kv_heads=2, vocab_size=13)][size]
    key_mask_ = left_padded(B, N)
    positions = np.maximum(np.arange(N)[None, :] - (~key_mask_).sum(axis=1, keepdims=True), 0)
    return DecoderLM(config, rng), (rng.integers(0, 13, (B, N)),), \
        {"key_mask": key_mask_, "positions": positions}


spec.exercise(10, "model", "the decoder-only model (tied head)",
              "tutorial part 1, from the last layer to next-token scores; tutorial part 2 §13, what logits are",
              backward=("t10_model.py:TiedHead.backward", "t10_model.py:DecoderLM.backward"),
              forward=("t10_model.py:TiedHead.forward",),
              checks=(("TiedHead", (0, 1)), ("DecoderLM", (0, 1, 2)), ("DecoderLM (Mixtral, pooled)", (1,))),
              components=("decoder_lm",))


def decoder(L, g, **overrides):
    """A small float64 DecoderLM of the learner's package (13 words, width 8, 2 heads)."""
    config = L.t10_model.DecoderConfig(**{**dict(vocab_size=13, d_model=8, n_heads=2, max_len=8), **overrides})
    return L.t10_model.DecoderLM(config, g, np.float64)


@spec.claim("model", "causal: the logits at positions 0..2 send no gradient to the position rows after 2")
def causal_model_gradient(L, R):
    g = claims.rng()
    model = decoder(L, g, n_layers=2)
    logits, cache = model.forward(g.integers(0, 13, (2, 6)))
    model.backward(claims.upstream_at(logits.shape, (slice(None), slice(0, 3)), g), cache)
    claims.zero("positions.weight.grad after row 2", model.positions.weight.grad[3:])


@spec.claim("model", "a tied head and the token table are one Parameter: it receives the lookup's and "
                     "the head's gradient")
def tied_head_receives_both(L, R):
    g = claims.rng()
    tied, untied = decoder(L, g, tie_embeddings=True), decoder(L, g)
    untied.load_state_dict({**tied.state_dict(), "head.weight": tied.tokens.weight.data.T})
    token_ids = g.integers(0, 13, (2, 5))
    G = g.standard_normal((2, 5, 13))
    for model in (tied, untied):
        model.backward(G, model.forward(token_ids)[1])
    claims.close("tokens.weight.grad of the tied model", tied.tokens.weight.grad,
                 untied.tokens.weight.grad + untied.head.weight.grad.T)
