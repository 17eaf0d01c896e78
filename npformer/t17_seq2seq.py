"""An encoder-decoder model: the encoder reads the whole source, a causal decoder
reads its own prefix and, through cross-attention, every source position.

src_ids [B, M] -> Encoder -> memory [B, M, d]
tgt_ids [B, N] -> embeddings -> decoder blocks (self-attention, cross-attention, FFN) -> logits [B, N, V]

Cross-attention is attention whose queries come from the decoder stream and
whose keys and values come from the encoder output (translation: Q from the
sentence being written, K/V from the sentence being read). Every decoder layer
reads the same memory, so in backward the memory's gradient is the SUM of what
each layer sends back, and the encoder runs its backward once on that sum.

No fast twins: everything here runs as written on either track (a ``print`` in it shows);
the layers' parts call the twins named in their own files.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .t04_attention import padding_mask
from .t09_block import BlockConfig, build_block, build_norm
from .t16_cross_attention import CrossAttention
from .t01_embedding import Embedding, Embeddings, position_table
from .t15_encoder import Encoder, EncoderConfig
from .t02_linear import Linear, sum_over_positions
from .t10_model import TiedHead
from .core.module import Cache, ConfigDict, Module, Parameter
from .core.validate import (check_choice, check_float, check_key_mask, check_padding_idx, check_positive,
                            check_rng, check_token_ids)


# -- the decoder layer ------------------------------------------------------------------
@dataclass(frozen=True)
class EncoderDecoderBlockCache(Cache):
    """The caches of the three norms, both attentions and the FFN."""

    norm1: Cache
    attn: Cache
    cross_norm: Cache
    cross_attn: Cache
    norm2: Cache
    ffn: Cache


class EncoderDecoderBlock(Module):
    """A decoder layer: causal self-attention, cross-attention to the memory, FFN.

    Pre-Norm:  h = x + Attn(N1(x));  g = h + Cross(Nc(h), mem);  y = g + FFN(N2(g))
    Post-Norm: h = N1(x + Attn(x));  g = Nc(h + Cross(h, mem));  y = N2(g + FFN(g))
    ``forward(x, memory, mask, memory_mask)``: ``mask`` for the self-attention
    (causal and target padding), ``memory_mask`` for the cross-attention (source padding).
    """

    def __init__(self, attn, cross_attn, ffn, norm1, cross_norm, norm2, prenorm=True):
        self.norm1, self.attn = norm1, attn
        self.cross_norm, self.cross_attn = cross_norm, cross_attn
        self.norm2, self.ffn = norm2, ffn
        self.prenorm = prenorm

    def forward(self, x, memory, mask=None, memory_mask=None):
        """x [B, N, d] and memory [B, M, d] -> (y [B, N, d], cache)."""
        if self.prenorm:
            a, norm1 = self.norm1.forward(x)
            attended, attn = self.attn.forward(a, mask)
            h = x + attended
            c, cross_norm = self.cross_norm.forward(h)
            read, cross = self.cross_attn.forward(c, memory, memory_mask)
            g = h + read
            f, norm2 = self.norm2.forward(g)
            fed, ffn = self.ffn.forward(f)
            y = g + fed
        else:
            attended, attn = self.attn.forward(x, mask)
            h, norm1 = self.norm1.forward(x + attended)
            read, cross = self.cross_attn.forward(h, memory, memory_mask)
            g, cross_norm = self.cross_norm.forward(h + read)
            fed, ffn = self.ffn.forward(g)
            y, norm2 = self.norm2.forward(g + fed)
        return y, EncoderDecoderBlockCache(norm1, attn, cross_norm, cross, norm2, ffn)

    def backward(self, d_out, cache):
        """-> (d_x, d_memory); the caller sums d_memory over layers."""
        if self.prenorm:
            d_f = self.ffn.backward(d_out, cache.ffn)                      # undoes fed = FFN(f)
            d_g = d_out + self.norm2.backward(d_f, cache.norm2)            # undoes y = g + fed, f = N2(g)
            d_c, d_memory = self.cross_attn.backward(d_g, cache.cross_attn)   # undoes read = Cross(c, mem)
            d_h = d_g + self.cross_norm.backward(d_c, cache.cross_norm)    # undoes g = h + read, c = Nc(h)
            d_a = self.attn.backward(d_h, cache.attn)                      # undoes attended = Attn(a)
            d_x = d_h + self.norm1.backward(d_a, cache.norm1)              # undoes h = x + attended
        else:
            d_sum3 = self.norm2.backward(d_out, cache.norm2)               # undoes y = N2(g + fed)
            d_g = d_sum3 + self.ffn.backward(d_sum3, cache.ffn)            # undoes fed = FFN(g)
            d_sum2 = self.cross_norm.backward(d_g, cache.cross_norm)       # undoes g = Nc(h + read)
            d_h, d_memory = self.cross_attn.backward(d_sum2, cache.cross_attn)   # undoes read = Cross(h, mem)
            d_h = d_h + d_sum2                                             # h reaches the sum twice
            d_sum1 = self.norm1.backward(d_h, cache.norm1)                 # undoes h = N1(x + attended)
            d_x = d_sum1 + self.attn.backward(d_sum1, cache.attn)          # undoes attended = Attn(x)
        return d_x, d_memory


# -- the configuration --------------------------------------------------------------------
SEQ2SEQ_POSITIONS = ("learned", "sinusoidal", "rope", "none")


@dataclass
class Seq2SeqConfig(ConfigDict):
    """Everything that shapes an encoder-decoder. Defaults: a tiny Pre-Norm model.

    ``vocab_size`` is the target vocabulary (and the source one unless
    ``src_vocab_size`` is set). ``share_embeddings``: one token table for
    source and target (needs equal vocabularies); ``tie_head``: logits read the
    target token table; ``logits_bias``: a bias added to the logits (BART's
    final_logits_bias). ``final_norm`` None means "exactly when Pre-Norm".
    Encoder and decoder each have their own position table and embedding norm.
    ``pad_token_id``: a token row the lookups never update (PyTorch's ``padding_idx``,
    in the source and the target table; BART's is 1), None for none. A head tied to
    the table still sends that row its gradient, as in PyTorch.
    """

    vocab_size: int = 50
    src_vocab_size: int | None = None
    d_model: int = 8
    n_heads: int = 2
    n_kv_heads: int | None = None
    n_encoder_layers: int = 1
    n_decoder_layers: int = 1
    max_len: int = 16                   # longest source and longest target
    positions: str = "learned"          # learned | sinusoidal | rope | none
    norm: str = "layernorm"
    ffn: str = "gelu"
    ffn_hidden: int | None = None
    prenorm: bool = True
    embed_norm: bool = False
    final_norm: bool | None = None
    attn_bias: bool = True
    ffn_bias: bool = True
    norm_eps: float = 1e-5
    embed_scale: float = 1.0
    share_embeddings: bool = True
    tie_head: bool = True
    logits_bias: bool = False
    rope_theta: float = 10000.0        # RoPE's base (Rotary's ``base``), not an angle
    init_std: float = 0.02
    pad_token_id: int | None = None     # a frozen token row (torch's padding_idx)

    @classmethod
    def bart(cls, **overrides):
        """BART: learned positions, embedding LayerNorm, Post-Norm, exact GELU, biases,
        one shared token table tied to the head, a logits bias."""
        return cls(**{**dict(positions="learned", norm="layernorm", ffn="gelu", prenorm=False,
                             embed_norm=True, final_norm=False, attn_bias=True, ffn_bias=True,
                             norm_eps=1e-5, share_embeddings=True, tie_head=True,
                             logits_bias=True), **overrides})

    def __post_init__(self):
        self.validate()

    def validate(self):
        """ValueError naming the first field that cannot describe the model."""
        for name in ("vocab_size", "n_decoder_layers"):
            check_positive(name, getattr(self, name))
        if self.src_vocab_size is not None:
            check_positive("src_vocab_size", self.src_vocab_size)
        check_choice("positions", self.positions, SEQ2SEQ_POSITIONS)
        if self.share_embeddings and self.src_vocab_size not in (None, self.vocab_size):
            raise ValueError(f"src_vocab_size: share_embeddings needs one vocabulary, got "
                             f"src_vocab_size={self.src_vocab_size} and vocab_size={self.vocab_size}")
        check_padding_idx("pad_token_id", self.pad_token_id, self.vocab_size)
        self.encoder_config()            # width, heads, norm, ffn ... checked there
        self.block_config()

    @property
    def use_final_norm(self):
        """Whether the decoder ends in a norm (``final_norm``, or Pre-Norm when it is None)."""
        return self.prenorm if self.final_norm is None else self.final_norm

    def encoder_config(self):
        """The ``EncoderConfig`` of the source side (no segments)."""
        return EncoderConfig(vocab_size=self.src_vocab_size or self.vocab_size, d_model=self.d_model,
                             n_heads=self.n_heads, n_kv_heads=self.n_kv_heads,
                             n_layers=self.n_encoder_layers, max_len=self.max_len, type_vocab_size=0,
                             positions=self.positions, norm=self.norm, ffn=self.ffn,
                             ffn_hidden=self.ffn_hidden, prenorm=self.prenorm,
                             embed_norm=self.embed_norm, final_norm=self.final_norm,
                             attn_bias=self.attn_bias, ffn_bias=self.ffn_bias, norm_eps=self.norm_eps,
                             embed_scale=self.embed_scale, rope_theta=self.rope_theta,
                             init_std=self.init_std, pad_token_id=self.pad_token_id)

    def block_config(self):
        """The ``BlockConfig`` of the decoder's self-attention, FFN and norms (causal)."""
        return BlockConfig.from_config(self, n_layers=self.n_decoder_layers, causal=True,
                                       rope=self.positions == "rope")


def build_decoder_block(config, rng, dtype):
    """A decoder layer: ``build_block``'s self-attention, FFN and norms, plus cross-attention."""
    block_config = config.block_config()
    base = build_block(block_config, rng, dtype)
    cross = CrossAttention(config.d_model, config.n_heads, config.n_kv_heads, bias=config.attn_bias,
                           rng=rng, dtype=dtype, out_std=block_config.out_std)
    return EncoderDecoderBlock(base.attn, cross, base.ffn, base.norm1, build_norm(block_config, dtype),
                               base.norm2, config.prenorm)


# -- the model ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DecodeCache(Cache):
    """The caches of the decoder side: embeddings, blocks, final norm, head."""

    embed: Cache
    blocks: tuple
    final_norm: Cache | None
    head: Cache

    def cross_attention(self, layer=0):
        """Cross-attention weights [B, H, N, M] of one decoder layer."""
        return self.blocks[layer].cross_attn.weights


@dataclass(frozen=True)
class EncoderDecoderCache(Cache):
    """The encoder's cache and the decoder's."""

    encoder: Cache
    decoder: DecodeCache


class EncoderDecoder(Module):
    """The encoder-decoder described by a ``Seq2SeqConfig``.

    ``forward(src_ids, tgt_ids, src_mask=None, tgt_mask=None) -> (logits [B, N, V], cache)``;
    ``backward`` returns None (ids are integers). ``encode`` and ``decode_forward``
    / ``decode_backward`` are the two halves (generation encodes once).

    Parameter names: ``encoder.*`` (an ``Encoder``: tokens, positions,
    embed_norm, blocks, final_norm), then the decoder's ``tokens.weight``
    (absent when shared: the table is ``encoder.tokens.weight``),
    ``positions.weight``, ``embed_norm.gamma``/``.beta``, and per layer i
    ``blocks.{i}.norm1``, ``.attn.qkv``, ``.attn.out`` (causal self-attention),
    ``blocks.{i}.cross_norm``, ``.cross_attn.q``, ``.cross_attn.kv`` (columns [K | V]),
    ``.cross_attn.out``, ``blocks.{i}.norm2``, ``.ffn.up``, ``.ffn.down``; then
    ``final_norm``, ``head.weight`` (absent when tied) and ``logits_bias`` [V].
    For BART: norm1 = self_attn_layer_norm, cross_attn = encoder_attn,
    cross_norm = encoder_attn_layer_norm, norm2 = final_layer_norm, embed_norm =
    layernorm_embedding, positions = embed_positions without its first 2 rows.
    ``rng``: the Generator every weight is drawn from (None: ``np.random.default_rng(0)``).
    """

    def __init__(self, config=None, rng=None, dtype=np.float32):
        config = Seq2SeqConfig() if config is None else config
        if not isinstance(config, Seq2SeqConfig):
            raise TypeError(f"config: expected a Seq2SeqConfig or None, got {type(config).__name__}")
        config.validate()
        rng = check_rng(rng)
        self.config = config
        d, std = config.d_model, config.init_std
        self.encoder = Encoder(config.encoder_config(), rng, dtype)
        if config.share_embeddings:
            self.tokens = self.encoder.tokens                  # the same Parameter, two readers
        else:
            self.tokens = Embedding(config.vocab_size, d, rng, std, dtype, config.pad_token_id)
        self.positions = position_table(config.positions, config.max_len, d, rng, std, dtype)
        block_config = config.block_config()
        self.embed_norm = build_norm(block_config, dtype) if config.embed_norm else None
        self.embed = Embeddings(self.tokens, self.positions, norm=self.embed_norm,
                                scale=config.embed_scale)
        self.blocks = [build_decoder_block(config, rng, dtype) for _ in range(config.n_decoder_layers)]
        self.final_norm = build_norm(block_config, dtype) if config.use_final_norm else None
        if config.tie_head:
            self.head = TiedHead(self.tokens)
        else:
            self.head = Linear(d, config.vocab_size, False, rng, std=std, dtype=dtype)
        self.logits_bias = Parameter(np.zeros(config.vocab_size, dtype)) if config.logits_bias else None

    def encode(self, src_ids, src_mask=None):
        """Inference convenience: the encoder output (memory) [B, M, d]."""
        return self.encoder.forward(src_ids, src_mask)[0]

    def decode_forward(self, memory, tgt_ids, src_mask=None, tgt_mask=None):
        """memory [B, M, d], tgt_ids [B, N] -> (logits [B, N, V], cache).

        Target position n reads target positions <= n (and only real ones, by
        ``tgt_mask``) and every real source position (by ``src_mask``).
        """
        c = self.config
        tgt_ids = check_token_ids("tgt_ids", tgt_ids, c.vocab_size)
        check_float("memory", memory, self.dtype)
        B, N = tgt_ids.shape
        if memory.ndim != 3 or memory.shape[0] != B or memory.shape[2] != c.d_model:
            raise ValueError(f"memory: expected shape ({B}, M, {c.d_model}), got {memory.shape}")
        src_mask = check_key_mask("src_mask", src_mask, memory.shape[:2])
        tgt_mask = check_key_mask("tgt_mask", tgt_mask, (B, N))
        if self.positions is not None and N > c.max_len:
            raise ValueError(f"tgt_ids: sequence length {N} exceeds max_len {c.max_len}")
        self_mask = None if tgt_mask is None else padding_mask(key_mask=tgt_mask)   # [B, 1, 1, N]
        memory_mask = None if src_mask is None else padding_mask(key_mask=src_mask)  # [B, 1, 1, M]

        x, embed = self.embed.forward(tgt_ids, np.arange(N))              # [B, N, d]
        blocks = []
        for block in self.blocks:
            x, block_cache = block.forward(x, memory, self_mask, memory_mask)
            blocks.append(block_cache)
        final_cache = None
        if self.final_norm is not None:
            x, final_cache = self.final_norm.forward(x)
        logits, head_cache = self.head.forward(x)                         # [B, N, V]
        if self.logits_bias is not None:
            logits = logits + self.logits_bias.data
        return logits, DecodeCache(embed, tuple(blocks), final_cache, head_cache)

    def decode_backward(self, d_logits, cache):
        """Accumulates the decoder's gradients; returns d_memory, summed over every layer."""
        if self.logits_bias is not None:
            self.logits_bias.grad += sum_over_positions(d_logits)         # forward: logits + bias
        d_x = self.head.backward(d_logits, cache.head)
        if self.final_norm is not None:
            d_x = self.final_norm.backward(d_x, cache.final_norm)
        d_memory = 0
        for block, block_cache in zip(reversed(self.blocks), reversed(cache.blocks)):
            d_x, d_read = block.backward(d_x, block_cache)
            d_memory = d_memory + d_read                                  # every layer read it
        self.embed.backward(d_x, cache.embed)
        return d_memory

    def forward(self, src_ids, tgt_ids, src_mask=None, tgt_mask=None):
        """src_ids [B, M], tgt_ids [B, N] -> (logits [B, N, V], cache).

        ``src_mask`` [B, M] and ``tgt_mask`` [B, N] bool, True at real tokens.
        """
        src_ids = check_token_ids("src_ids", src_ids, self.encoder.config.vocab_size)
        tgt_ids = check_token_ids("tgt_ids", tgt_ids, self.config.vocab_size)
        if src_ids.shape[0] != tgt_ids.shape[0]:
            raise ValueError(f"tgt_ids: expected batch size {src_ids.shape[0]} (as src_ids), "
                             f"got {tgt_ids.shape[0]}")
        src_mask = check_key_mask("src_mask", src_mask, src_ids.shape)
        memory, enc_cache = self.encoder.forward(src_ids, src_mask)      # [B, M, d]
        logits, dec_cache = self.decode_forward(memory, tgt_ids, src_mask, tgt_mask)
        return logits, EncoderDecoderCache(enc_cache, dec_cache)

    def output_shape(self, cache):
        """[B, N, V]: the logits' shape, which backward's d_logits must have."""
        return self.head.output_shape(cache.decoder.head)

    def backward(self, d_logits, cache):
        """Accumulates every parameter's gradient; ids have none, so returns None."""
        d_memory = self.decode_backward(d_logits, cache.decoder)
        self.encoder.backward(d_memory, cache.encoder)
        return None
