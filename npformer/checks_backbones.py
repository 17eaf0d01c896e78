"""Gradient-check cases of the encoder-only and encoder-decoder backbones; see checks.py."""
import numpy as np

from .checks import _float, _shape, case


def _key_mask(B, N):
    """Real tokens everywhere except the last position of the first sequence (right padding)."""
    mask = np.ones((B, N), bool)
    mask[0, -1] = False
    return mask


@case("mean_pool")
def _(rng, size):
    from .encoder import mean_pool_backward, mean_pool_forward
    B, N, d, H = _shape(size)
    return (mean_pool_forward, mean_pool_backward), (_float(rng, B, N, d),), \
        {"key_mask": _key_mask(B, N)}


@case("l2_normalize")
def _(rng, size):
    from .encoder import l2_normalize_backward, l2_normalize_forward
    B, N, d, H = _shape(size)
    # offset: with rng seeded like gradcheck's own, x would equal the upstream gradient,
    # which is radial, so the true gradient would be 0 and the check vacuous
    return (l2_normalize_forward, l2_normalize_backward), (0.5 + _float(rng, B, N, d),), {}


@case("Encoder")
def _(rng, size):
    from .encoder import Encoder, EncoderConfig
    B, N, d, H = _shape(size)
    config = [EncoderConfig.bert(d_model=d, n_heads=H, vocab_size=11),                  # Post-Norm
              EncoderConfig(d_model=d, n_heads=H, vocab_size=11, n_layers=2, prenorm=True,
                            type_vocab_size=3, embed_scale=2.0),                       # Pre-Norm
              EncoderConfig(d_model=d, n_heads=H, n_kv_heads=2, vocab_size=11, n_layers=2,
                            positions="rope", norm="rmsnorm", ffn="swiglu", attn_bias=False,
                            type_vocab_size=0, embed_norm=False)][size]
    ids = rng.integers(0, 11, (B, N))
    options = {"key_mask": _key_mask(B, N)}
    if config.type_vocab_size:
        options["segments"] = rng.integers(0, config.type_vocab_size, (B, N))
    return Encoder(config, rng), (ids,), options


@case("CrossAttention")
def _(rng, size):
    from .seq2seq import CrossAttention
    B, N, d, H = _shape(size)
    M = N + 2                                        # source longer than target
    H_kv, d_memory = [(H, d), (H, d + 2), (2, d)][size]
    mask = _key_mask(B, M)[:, None, None, :]
    return (CrossAttention(d, H, H_kv, d_memory, bias=size != 2, rng=rng),
            (_float(rng, B, N, d), _float(rng, B, M, d_memory)), {"mask": mask})


@case("EncoderDecoderBlock")
def _(rng, size):
    from .attention import causal_mask
    from .seq2seq import Seq2SeqConfig, build_decoder_block
    B, N, d, H = _shape(size)
    M = N + 1
    config = Seq2SeqConfig(d_model=d, n_heads=H, prenorm=size != 0,
                           ffn=("gelu", "relu", "swiglu")[size])
    return (build_decoder_block(config, rng, np.float64),
            (_float(rng, B, N, d), _float(rng, B, M, d)),
            {"mask": causal_mask(N)[None, None], "memory_mask": _key_mask(B, M)[:, None, None, :]})


@case("EncoderDecoder")
def _(rng, size):
    from .seq2seq import EncoderDecoder, Seq2SeqConfig
    B, N, d, H = _shape(size)
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
        {"src_mask": _key_mask(B, M), "tgt_mask": _key_mask(B, N)}
