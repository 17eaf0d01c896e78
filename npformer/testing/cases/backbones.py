"""Gradient-check cases of the encoder-only and encoder-decoder backbones."""
from __future__ import annotations

import numpy as np

from ...t15_encoder import (Encoder, EncoderConfig, Pooler, l2_normalize_backward,
                            l2_normalize_forward, mean_pool_backward, mean_pool_forward)
from ...core.module import Module
from ...t17_seq2seq import CrossAttention, EncoderDecoder, Seq2SeqConfig, build_decoder_block
from .registry import case, normal, real_tokens, shape


@case("mean_pool")
def _(rng, size):
    B, N, d, H = shape(size)
    key_mask = real_tokens(B, N)
    if size == 1:
        key_mask[-1] = False                    # a row of padding alone pools to zeros
    return (mean_pool_forward, mean_pool_backward), (normal(rng, B, N, d),), {"key_mask": key_mask}


@case("l2_normalize")
def _(rng, size):
    B, N, d, H = shape(size)
    # offset: were x a multiple of the upstream gradient (both radial), the true gradient
    # would be 0 and the check vacuous
    return (l2_normalize_forward, l2_normalize_backward), (0.5 + normal(rng, B, N, d),), {}


@case("Encoder")
def _(rng, size):
    B, N, d, H = shape(size)
    config = [EncoderConfig.bert(d_model=d, n_heads=H, vocab_size=11),                  # Post-Norm
              EncoderConfig(d_model=d, n_heads=H, vocab_size=11, n_layers=2, prenorm=True,
                            type_vocab_size=3, embed_scale=2.0),                       # Pre-Norm
              EncoderConfig(d_model=d, n_heads=H, n_kv_heads=2, vocab_size=11, n_layers=2,
                            positions="rope", norm="rmsnorm", ffn="swiglu", attn_bias=False,
                            type_vocab_size=0, embed_norm=False)][size]
    ids = rng.integers(0, 11, (B, N))
    options = {"key_mask": real_tokens(B, N)}
    if config.type_vocab_size:
        options["segments"] = rng.integers(0, config.type_vocab_size, (B, N))
    return Encoder(config, rng), (ids,), options


@case("Pooler")
def _(rng, size):
    B, N, d, H = shape(size)
    return Pooler(d, rng), (normal(rng, B, N, d),), {}


class PooledEncoder(Module):
    """Check harness: an Encoder with its pooler, ``pooler_output`` [B, d] as the output, so
    one check runs through the pooler and every layer below it."""

    def __init__(self, encoder):
        self.encoder = encoder

    def forward(self, ids, key_mask=None, segments=None):
        """The encoder's pooler_output."""
        states, cache = self.encoder.forward(ids, key_mask, segments)
        pooled, pool_cache = self.encoder.pooler.forward(states)
        return pooled, (cache, pool_cache)

    def backward(self, d_pooled, caches):
        """The encoder's backward from the pooler_output's gradient."""
        cache, pool_cache = caches
        return self.encoder.backward(self.encoder.pooler.backward(d_pooled, pool_cache), cache)


@case("Encoder (pooler, padding row)")
def _(rng, size):
    # [PAD] = 0 sits at the padded positions only: nothing real reads them, so the frozen
    # row's true gradient is zero and the check covers every parameter in full
    B, N, d, H = shape(size)
    config = EncoderConfig.bert(d_model=d, n_heads=H, vocab_size=11, n_layers=1 + size % 2,
                                pad_token_id=0, pooler=True)
    key_mask = real_tokens(B, N)
    ids = np.where(key_mask, rng.integers(1, 11, (B, N)), 0)
    return PooledEncoder(Encoder(config, rng)), (ids,), \
        {"key_mask": key_mask, "segments": rng.integers(0, 2, (B, N))}


@case("CrossAttention")
def _(rng, size):
    B, N, d, H = shape(size)
    M = N + 2                                        # source longer than target
    H_kv, d_memory = [(H, d), (H, d + 2), (2, d)][size]
    mask = real_tokens(B, M)[:, None, None, :]
    return (CrossAttention(d, H, H_kv, d_memory, bias=size != 2, rng=rng),
            (normal(rng, B, N, d), normal(rng, B, M, d_memory)), {"mask": mask})


@case("EncoderDecoderBlock")
def _(rng, size):
    B, N, d, H = shape(size)
    M = N + 1
    config = Seq2SeqConfig(d_model=d, n_heads=H, prenorm=size != 0,
                           ffn=("gelu", "relu", "swiglu")[size])
    return (build_decoder_block(config, rng, np.float64),
            (normal(rng, B, N, d), normal(rng, B, M, d)),
            {"mask": real_tokens(B, N)[:, None, None, :],
             "memory_mask": real_tokens(B, M)[:, None, None, :]})


@case("EncoderDecoder")
def _(rng, size):
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
