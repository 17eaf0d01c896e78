"""The encoder-decoder block and model (``t17_seq2seq.py``), as the engines know them.

One decoder layer (self-attention, cross-attention to the memory, FFN) and the decoder half of
the model as layers whose weights are arguments, their gradient-check cases, exercise 17 and
its claims. Mistakes: ``t17_seq2seq.json``.
"""
from __future__ import annotations

import numpy as np

from ..t17_seq2seq import EncoderDecoder, Seq2SeqConfig, build_decoder_block
from . import claims
from .draw import (Example, alternating, arrays, assume_varied, block_recipe, ids, key_mask, sampled, size, st,
                   weights_of, width)
from .layered import all_parameters, grads, loaded, rng, weight_names
from .case_inputs import normal, real_tokens, shape
from .registry import Spec, lookup
from .t09_block import WEIGHTS, zero_output_projections

spec = Spec("t17_seq2seq.py")
SEQ2SEQ = ("t17_seq2seq.EncoderDecoderBlock.backward", "t17_seq2seq.EncoderDecoder.decode_backward")
MASKS = ("mask", "memory_mask", "src_mask", "tgt_mask")


def build_decoder_layer(d, recipe, dtype):
    """npformer's encoder-decoder layer of width ``d`` as ``recipe`` describes it."""
    fields = {k: v for k, v in recipe.items() if k not in MASKS + ("causal",)}
    config = lookup("t17_seq2seq.Seq2SeqConfig")(d_model=d, vocab_size=2, **fields)
    return lookup("t17_seq2seq.build_decoder_block")(config, rng(), dtype)


def build_model(d, recipe, dtype):
    """npformer's EncoderDecoder of width ``d`` as ``recipe`` describes it."""
    fields = {k: v for k, v in recipe.items() if k not in MASKS}
    config = lookup("t17_seq2seq.Seq2SeqConfig")(d_model=d, share_embeddings=False, **fields)
    return lookup("t17_seq2seq.EncoderDecoder")(config, rng(), dtype)


def decoder_half(named):
    """The parameters decoding reads: all but the encoder's own."""
    return [(n, p) for n, p in named if not n.startswith("encoder.")]


def seq2seq_block_forward(x, memory, *weights, n_heads=1, n_kv_heads=None, norm="layernorm", ffn="gelu",
                          ffn_hidden=None, prenorm=True, attn_bias=True, ffn_bias=True, mask=None,
                          memory_mask=None):
    """x [B, N, d], memory [B, M, d] -> (the decoder layer's output [B, N, d], cache)."""
    recipe = dict(n_heads=n_heads, n_kv_heads=n_kv_heads, norm=norm, ffn=ffn, ffn_hidden=ffn_hidden,
                  prenorm=prenorm, attn_bias=attn_bias, ffn_bias=ffn_bias)
    block, params = loaded(build_decoder_layer, all_parameters, x.shape[-1], recipe, weights, x.dtype)
    out, cache = block.forward(x, memory, mask, memory_mask)
    return out, (block, params, cache)


def seq2seq_block_backward(d_out, cache):
    """-> (d_x, d_memory, d_weights...)."""
    block, params, inner = cache
    d_x, d_memory = block.backward(d_out, inner)
    return (d_x, d_memory) + grads(params)


def seq2seq_decoder_forward(memory, tgt_ids, *weights, vocab_size=5, max_len=4, n_heads=1, n_kv_heads=None,
                            n_decoder_layers=1, positions="learned", norm="layernorm", ffn="gelu",
                            ffn_hidden=None, prenorm=True, tie_head=True, logits_bias=False, attn_bias=True,
                            ffn_bias=True, src_mask=None, tgt_mask=None):
    """memory [B, M, d], tgt_ids [B, N] -> (logits [B, N, V], cache): ``decode_forward``."""
    recipe = dict(vocab_size=vocab_size, max_len=max_len, n_heads=n_heads, n_kv_heads=n_kv_heads,
                  n_decoder_layers=n_decoder_layers, positions=positions, norm=norm, ffn=ffn,
                  ffn_hidden=ffn_hidden, prenorm=prenorm, tie_head=tie_head, logits_bias=logits_bias,
                  attn_bias=attn_bias, ffn_bias=ffn_bias)
    model, params = loaded(build_model, decoder_half, memory.shape[-1], recipe, weights, memory.dtype)
    out, cache = model.decode_forward(memory, tgt_ids, src_mask, tgt_mask)
    return out, (model, params, cache)


def seq2seq_decoder_backward(d_out, cache):
    """-> (d_memory, None for the ids, d_weights...)."""
    model, params, inner = cache
    return (model.decode_backward(d_out, inner), None) + grads(params)


@spec.layer("seq2seq_block", "an encoder-decoder layer: self-attention, cross-attention to the memory, FFN",
            f"seq2seq_block_forward(x, memory, *weights, ..., mask=None, memory_mask=None) -> (y, cache); "
            f"{WEIGHTS}", (seq2seq_block_forward, seq2seq_block_backward), "(d_x, d_memory, d_weights...)",
            SEQ2SEQ[:1])
def seq2seq_block_inputs(draw):
    """x [B, N, d] (rows alternating their signs, d of 3 or 4), the memory [B, M, d] it reads
    (M from N - 1 to N + 2), and the weights of an encoder-decoder layer (Pre- or Post-Norm);
    target and source padding masks or none."""
    B, N, d = draw(size(1, 2)), draw(size(1, 3)), draw(sampled([3, 4]))
    M = max(1, N + draw(st().integers(-1, 2)))
    recipe = {**block_recipe(draw, d), "prenorm": draw(st().booleans())}
    x = alternating(draw(arrays((B, N, d))))
    assume_varied(x)
    memory = draw(arrays((B, M, d)))
    names, weights = weights_of(draw, weight_names(build_decoder_layer, all_parameters, d, recipe))
    tgt, src = key_mask(draw, B, N), key_mask(draw, B, M)
    recipe["mask"] = None if tgt is None else tgt[:, None, None, :]
    recipe["memory_mask"] = None if src is None else src[:, None, None, :]
    return Example(("x", "memory") + names, (x, memory) + weights, recipe)


@spec.layer("seq2seq_decoder", "the encoder-decoder's decoder half (decode_forward, decode_backward)",
            f"seq2seq_decoder_forward(memory, tgt_ids, *weights, ..., src_mask=None, tgt_mask=None) -> "
            f"(logits, cache); {WEIGHTS}", (seq2seq_decoder_forward, seq2seq_decoder_backward),
            "(d_memory, None, d_weights...)", SEQ2SEQ)
def seq2seq_decoder_inputs(draw):
    """The memory [B, M, d], target ids [B, N] and the weights of an encoder-decoder's decoder
    (one or two layers, learned positions, RoPE or none, a tied head or its own, a logits
    bias or none); source and target masks or none."""
    positions = draw(sampled(["learned", "rope", "none"]))
    B, N, d, V = draw(size(1, 2)), draw(size(1, 3)), width(draw, positions), draw(st().integers(3, 5))
    M = max(1, N + draw(st().integers(-1, 2)))
    recipe = {**block_recipe(draw, d, positions), "vocab_size": V, "max_len": max(N, M),
              "n_decoder_layers": draw(sampled([2, 1])), "positions": positions,
              "prenorm": draw(st().booleans()), "tie_head": draw(sampled([False, True])),
              "logits_bias": draw(sampled([True, False]))}
    memory = draw(arrays((B, M, d)))
    tokens = draw(ids((B, N), V))
    names, weights = weights_of(draw, weight_names(build_model, decoder_half, d, recipe))
    embedded = weights[0][tokens] + (weights[1][:N] if recipe["positions"] == "learned" else 0)
    assume_varied(embedded)
    return Example(("memory", "tgt_ids") + names, (memory, tokens) + weights,
                   {**recipe, "src_mask": key_mask(draw, B, M), "tgt_mask": key_mask(draw, B, N)})


# -- gradient-check cases ---------------------------------------------------------------------------
@spec.case("EncoderDecoderBlock")
def decoder_block_case(rng, size):
    B, N, d, H = shape(size)
    M = N + 1
    config = Seq2SeqConfig(d_model=d, n_heads=H, prenorm=size != 0,
                           ffn=("gelu", "relu", "swiglu")[size])
    return (build_decoder_block(config, rng, np.float64),
            (normal(rng, B, N, d), normal(rng, B, M, d)),
            {"mask": real_tokens(B, N)[:, None, None, :],
             "memory_mask": real_tokens(B, M)[:, None, None, :]})


@spec.case("EncoderDecoder")
def encoder_decoder_case(rng, size):
    B, N, d, H = shape(size)
    M = N + 1
    config = [Seq2SeqConfig.bart(d_model=d, n_heads=H, vocab_size=13, n_decoder_layers=2),
              Seq2SeqConfig(d_model=d, n_heads=H, vocab_size=13, src_vocab_size=9,
                            share_embeddings=False, tie_head=False, n_encoder_layers=2,
                            n_decoder_layers=2, positions="sinusoidal", embed_scale=2.0),
              Seq2SeqConfig(d_model=d, n_heads=H, n_kv_heads=2, vocab_size=13, positions="rope",
                            norm="rmsnorm", ffn="swiglu", attn_bias=False, share_embeddings=False,
                            tie_head=True, n_decoder_layers=2)][size]
    src_vocab = config.src_vocab_size or config.vocab_size
    src, tgt = rng.integers(0, src_vocab, (B, M)), rng.integers(0, 13, (B, N))
    return EncoderDecoder(config, rng), (src, tgt), \
        {"src_mask": real_tokens(B, M), "tgt_mask": real_tokens(B, N)}


spec.exercise(17, "seq2seq", "the encoder-decoder block and model",
              "tutorial part 1, GQA and MoE (encoder-decoder, cross-attention)",
              backward=("t17_seq2seq.py:EncoderDecoderBlock.backward", "t17_seq2seq.py:EncoderDecoder.decode_backward"),
              checks=(("EncoderDecoderBlock", (0, 1)), ("EncoderDecoder", (0, 2))),
              components=("seq2seq_block", "seq2seq_decoder"))


@spec.claim("seq2seq", "cross-attention: padded source positions get exactly zero memory gradient")
def padded_source_gets_no_memory_gradient(L, R):
    g = claims.rng()
    cross = L.t17_seq2seq.CrossAttention(8, 2, rng=g, dtype=np.float64)
    mask = np.ones((2, 1, 1, 4), bool)
    mask[0, ..., -1] = False
    out, cache = cross.forward(g.standard_normal((2, 3, 8)), g.standard_normal((2, 4, 8)), mask)
    claims.zero("d_memory at the padded source position", cross.backward(g.standard_normal(out.shape), cache)[1][0, -1])


@spec.claim("seq2seq", "with cross-attention silenced, the encoder receives no gradient at all")
def silent_cross_attention_stops_the_encoder(L, R):
    g = claims.rng()
    model = L.t17_seq2seq.EncoderDecoder(L.t17_seq2seq.Seq2SeqConfig(vocab_size=13, n_decoder_layers=2,
                                                             share_embeddings=False), g, np.float64)
    for block in model.blocks:
        zero_output_projections(block.cross_attn.out)
    logits, cache = model.forward(g.integers(0, 13, (2, 4)), g.integers(0, 13, (2, 3)))
    model.backward(g.standard_normal(logits.shape), cache)
    for name, p in model.encoder.named_parameters():
        claims.zero(f"encoder.{name}.grad", p.grad)
