"""Gradient-check cases of the function pairs and the decoder's components."""
from __future__ import annotations

import numpy as np

from ...t04_attention import (MultiHeadAttention, attention_backward, attention_forward,
                               grouped_attention_backward, grouped_attention_forward,
                               causal_mask, padding_mask)
from ...t09_block import BlockConfig, build_block
from ...t01_embedding import Embedding, Embeddings, LearnedPositions, SinusoidalPositions
from ...t07_ffn import FFN, SwiGLU, swiglu_gate_backward, swiglu_gate_forward
from ...t18_flash_attention import flash_attention_backward, flash_attention_forward
from ... import FUNCTION_PAIRS
from ...t03_softmax import softmax_backward, softmax_forward
from ...t02_linear import Linear, linear_backward, linear_forward
from ...t11_loss import IGNORE_INDEX, cross_entropy_backward, cross_entropy_forward
from ...t10_model import DecoderConfig, DecoderLM, TiedHead
from ...t08_norm import (LayerNorm, RMSNorm, layernorm_backward, layernorm_forward,
                         rmsnorm_backward, rmsnorm_forward)
from ...t05_rope import Rotary
from .registry import case, left_padded, normal, shape


# -- function pairs --------------------------------------------------------------------
@case("softmax")
def _(rng, size):
    B, N, d, H = shape(size)
    mask = rng.random((B, N, d)) < 0.7
    mask[0, 0] = False                      # a fully masked row: zero weights, zero gradient
    return (softmax_forward, softmax_backward), (normal(rng, B, N, d),), {"mask": mask}


def _activation_case(name):
    @case(name)
    def builder(rng, size):
        B, N, d, H = shape(size)
        return FUNCTION_PAIRS[name], (2 * normal(rng, B, N, d),), {}
    return builder


for _name in ("log_softmax", "relu", "gelu", "gelu_tanh", "silu", "tanh"):
    _activation_case(_name)


@case("linear")
def _(rng, size):
    B, N, d, H = shape(size)
    bias = (normal(rng, d + 3),) if size != 1 else ()          # with and without a bias
    return (linear_forward, linear_backward), (normal(rng, B, N, d), normal(rng, d, d + 3)) + bias, {}


@case("layernorm")
def _(rng, size):
    B, N, d, H = shape(size)
    return ((layernorm_forward, layernorm_backward),
            (normal(rng, B, N, d), 1 + 0.5 * normal(rng, d), normal(rng, d)), {"eps": 1e-5})


@case("rmsnorm")
def _(rng, size):
    B, N, d, H = shape(size)
    return (rmsnorm_forward, rmsnorm_backward), (normal(rng, B, N, d), 1 + 0.5 * normal(rng, d)), \
        {"eps": 1e-6}


def _attention_options(B, N, size):
    return [{"mask": causal_mask(N)[None, None] & padding_mask(np.full(B, N - 1), N, side="left")},
            {"causal": True, "window": 2},
            {"mask": padding_mask(np.full(B, N - 1), N)}][size]


@case("attention")
def _(rng, size):
    B, N, d, H = shape(size)
    D = d // H
    return ((attention_forward, attention_backward),
            (normal(rng, B, H, N, D), normal(rng, B, H, N, D), normal(rng, B, H, N, D)),
            _attention_options(B, N, size))


@case("grouped_attention")
def _(rng, size):
    B, N, d, H = shape(size)
    D, H_kv = d // H, max(1, H // 2)
    return ((grouped_attention_forward, grouped_attention_backward),
            (normal(rng, B, H, N, D), normal(rng, B, H_kv, N, D), normal(rng, B, H_kv, N, D)),
            _attention_options(B, N, size))


@case("flash_attention")
def _(rng, size):
    B, N, d, H = shape(size)
    D, H_kv = d // H, max(1, H // 2)
    options = [dict(causal=True, block_size=2),                       # several blocks, diagonal tiles
               dict(causal=True, window=2, block_size=3,              # window + left padding
                    mask=padding_mask(np.full(B, N - 1), N, side="left")),
               dict(causal=False, block_size=3)][size]
    return ((flash_attention_forward, flash_attention_backward),
            (normal(rng, B, H, N, D), normal(rng, B, H_kv, N, D), normal(rng, B, H_kv, N, D)), options)


@case("swiglu_gate")
def _(rng, size):
    B, N, d, H = shape(size)
    return (swiglu_gate_forward, swiglu_gate_backward), (2 * normal(rng, B, N, d), normal(rng, B, N, d)), {}


@case("cross_entropy")
def _(rng, size):
    B, N, d, H = shape(size)
    targets = rng.integers(0, d, (B, N))
    targets[0, 0] = IGNORE_INDEX            # an ignored (padded) target
    if size == 0:
        targets[:] = IGNORE_INDEX           # exactly one target counts: the mean divides by 1
        targets[0, 1] = 2
    return (cross_entropy_forward, cross_entropy_backward), (normal(rng, B, N, d), targets), {}


# -- modules -----------------------------------------------------------------------------
@case("Linear")
def _(rng, size):
    B, N, d, H = shape(size)
    return Linear(d, d + 3, True, rng), (normal(rng, B, N, d),), {}


@case("Embedding")
def _(rng, size):
    B, N, d, H = shape(size)
    ids = rng.integers(0, 5, (B, N))
    ids[0, :2] = 3                           # a repeated id accumulates
    return Embedding(7, d, rng), (ids,), {}


@case("Embedding (padding row)")
def _(rng, size):
    # The padding row's lookups send nothing back (torch's padding_idx), which no finite
    # difference can confirm: the upstream is zero where the ids read that row, so its true
    # gradient is zero too, and the check holds every other row to the full gradient.
    B, N, d, H = shape(size)
    ids = rng.integers(0, 7, (B, N))
    ids[0, :2] = 3                           # the padding row, read twice
    ids[-1, -1] = 2                          # its neighbours must still learn
    upstream = normal(rng, B, N, d) * (ids != 3)[..., None]
    return Embedding(7, d, rng, padding_idx=3), (ids,), {"upstream": upstream}


@case("LearnedPositions")
def _(rng, size):
    B, N, d, H = shape(size)
    return LearnedPositions(N + 2, d, rng), (np.arange(N),), {}


@case("Embeddings")
def _(rng, size):
    B, N, d, H = shape(size)
    tokens = Embedding(7, d, rng)
    positions = LearnedPositions(N + 2, d, rng)
    segments = Embedding(3, d, rng) if size != 0 else None
    norm = LayerNorm(d) if size == 2 else None
    embed = Embeddings(tokens, positions, segments, norm, scale=(1.0, 2.0, 0.5)[size])
    options = {"positions": np.arange(N) if size != 1 else rng.integers(0, N + 2, (B, N))}
    if segments is not None:
        options["segments"] = rng.integers(0, 3, (B, N))
    return embed, (rng.integers(0, 7, (B, N)),), options


@case("Embeddings (sinusoidal)")
def _(rng, size):
    B, N, d, H = shape(size)
    d = d + 1                                   # an odd width: one cosine column fewer than sines
    embed = Embeddings(Embedding(7, d, rng), SinusoidalPositions(N + 2, d))
    return embed, (rng.integers(0, 7, (B, N)),), {"positions": np.arange(2, 2 + N)}


@case("DecoderLM (tied, padding row)")
def _(rng, size):
    # the token table is read by the lookup and by the head; its padding row is frozen for the
    # lookup only, so it still receives the head's share (the ids never read it: finite
    # differences could not follow the frozen lookup)
    B, N, d, H = shape(size)
    config = DecoderConfig.gpt2(d_model=d, n_heads=H, vocab_size=9, pad_token_id=0)
    return DecoderLM(config, rng), (rng.integers(1, 9, (B, N)),), {}


@case("Rotary")
def _(rng, size):
    B, N, d, H = shape(size)
    layout = ("half", "interleaved", "half")[size]
    fraction = (1.0, 1.0, 0.5)[size]
    return Rotary(d, layout=layout, fraction=fraction), (normal(rng, B, H, N, d),), \
        {"positions": np.arange(3, 3 + N)}


@case("Rotary (three quarters)")
def _(rng, size):
    B, N, d, H = shape(size)
    # D_rot = 6 of D = 8: neither the whole head nor half of it
    return Rotary(2 * d, layout="interleaved", fraction=0.75), (normal(rng, B, H, N, 2 * d),), \
        {"positions": np.arange(1, 1 + N)}


@case("MultiHeadAttention")
def _(rng, size):
    B, N, d, H = shape(size)
    H_kv = (H, 1, 2)[size]
    rope = Rotary(d // H) if size == 2 else None
    if size == 1:                            # the causal rule inside, a padding mask outside
        return (MultiHeadAttention(d, H, H_kv, bias=True, rng=rng, causal=True),
                (normal(rng, B, N, d),), {"mask": padding_mask(np.full(B, N - 1), N, side="left")})
    return (MultiHeadAttention(d, H, H_kv, rope=rope, rng=rng), (normal(rng, B, N, d),),
            {"mask": causal_mask(N)})


@case("FFN")
def _(rng, size):
    B, N, d, H = shape(size)
    return FFN(d, activation=("relu", "gelu", "gelu_tanh")[size], rng=rng), (normal(rng, B, N, d),), {}


@case("SwiGLU")
def _(rng, size):
    B, N, d, H = shape(size)
    return SwiGLU(d, 3 * d, bias=size == 1, rng=rng), (normal(rng, B, N, d),), {}


@case("LayerNorm")
def _(rng, size):
    B, N, d, H = shape(size)
    return LayerNorm(d), (normal(rng, B, N, d),), {}


@case("RMSNorm")
def _(rng, size):
    B, N, d, H = shape(size)
    return RMSNorm(d), (normal(rng, B, N, d),), {}


def _block(prenorm, rng, size):
    B, N, d, H = shape(size)
    config = BlockConfig(d_model=d, n_heads=H, prenorm=prenorm, ffn=("gelu", "relu", "swiglu")[size],
                         rope=size == 2)
    # the mask and the positions a model hands its blocks: left padding, each row's own offsets
    options = [{}, {"mask": padding_mask(np.full(B, N - 1), N, side="left")},
               {"mask": padding_mask(np.full(B, N - 1), N), "positions": np.arange(N)[None] + np.arange(B)[:, None]}]
    return build_block(config, rng, np.float64), (normal(rng, B, N, d),), options[size]


@case("PreNormBlock")
def _(rng, size):
    return _block(True, rng, size)


@case("PostNormBlock")
def _(rng, size):
    return _block(False, rng, size)


@case("TiedHead")
def _(rng, size):
    B, N, d, H = shape(size)
    return TiedHead(Embedding(11, d, rng)), (normal(rng, B, N, d),), {}


@case("DecoderLM")
def _(rng, size):
    B, N, d, H = shape(size)
    config = [DecoderConfig(d_model=d, n_heads=H, vocab_size=13),
              DecoderConfig.gpt2(d_model=d, n_heads=H, vocab_size=13, n_layers=2),
              DecoderConfig.llama(d_model=d, n_heads=H, n_kv_heads=2, vocab_size=13, n_layers=2)][size]
    return DecoderLM(config, rng), (rng.integers(0, 13, (B, N)),), {"key_mask": left_padded(B, N)}


@case("DecoderLM (row positions)")
def _(rng, size):
    # positions [B, N]: each row its own positions (left padding shifts a row's start)
    B, N, d, H = shape(size)
    config = [DecoderConfig(d_model=d, n_heads=H, vocab_size=13, max_len=N + 2),
              DecoderConfig.gpt2(d_model=d, n_heads=H, vocab_size=13, max_len=N + 2),
              DecoderConfig.llama(d_model=d, n_heads=H, n_kv_heads=2, vocab_size=13)][size]
    key_mask = left_padded(B, N)
    positions = np.maximum(np.arange(N)[None, :] - (~key_mask).sum(axis=1, keepdims=True), 0)
    return DecoderLM(config, rng), (rng.integers(0, 13, (B, N)),), \
        {"key_mask": key_mask, "positions": positions}


@case("DecoderLM (flash)")
def _(rng, size):
    B, N, d, H = shape(size)
    config = [DecoderConfig(d_model=d, n_heads=H, vocab_size=13, attention="flash"),
              DecoderConfig.gpt2(d_model=d, n_heads=H, vocab_size=13, n_layers=2, window=2,
                                 attention="flash"),
              DecoderConfig.llama(d_model=d, n_heads=H, n_kv_heads=2, vocab_size=13, n_layers=2,
                                  attention="flash")][size]
    return DecoderLM(config, rng), (rng.integers(0, 13, (B, N)),), {"key_mask": left_padded(B, N)}
