"""An encoder-only model (BERT-style) and the sentence vector built on top of it.

The article's third backbone comparison: an encoder lets every position read in both
directions and yields a representation of the whole input, where a decoder reads only
backwards to generate. The blocks are ``t09_block``'s, built without the causal rule.

ids [B, N] -> token + position + segment embeddings -> LayerNorm -> blocks -> states [B, N, d]

Every position reads every real position, before and after it (no causal mask);
only padding is hidden, through ``key_mask`` [B, N] (True at real tokens).
A sentence vector is the mean of the states over the real tokens, optionally
scaled to unit length (the sentence-transformers recipe):

    states, _ = encoder.forward(ids, key_mask)
    vector, _ = mean_pool_forward(states, key_mask)      # [B, d]
    unit, _   = l2_normalize_forward(vector)             # [B, d], |unit| = 1

BERT's own summary of a sequence is its pooler (``EncoderConfig(pooler=True)``), one
Linear and a tanh on the first position ([CLS]), Hugging Face's ``pooler_output``:

    pooled, pool_cache = encoder.pooler.forward(states)  # [B, d] = tanh(states[:, 0] W + b)
    d_states = encoder.pooler.backward(d_pooled, pool_cache)   # [B, N, d], zero but at 0
    encoder.backward(d_states, cache)

BERT's layer is Post-Norm: h = LN(x + Attn(x)); y = LN(h + FFN(h)), with the
exact (erf) GELU, biases on every linear, LayerNorm eps 1e-12 and attention
scaled by 1/sqrt(D). ``EncoderConfig()`` is that recipe at a tiny size.

No fast twins: everything here runs as written on either track (a ``print`` in it shows).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .t04_attention import padding_mask
from .t09_block import BlockConfig, build_block, build_norm
from .t01_embedding import Embedding, Embeddings, position_table
from .t06_activations import tanh_backward, tanh_forward
from .t02_linear import Linear
from .core.module import Cache, ConfigDict, Module
from .core.validate import (check_choice, check_ids, check_key_mask, check_padding_idx, check_positive,
                            check_rng, check_states, check_token_ids)

ENCODER_POSITIONS = ("learned", "sinusoidal", "rope", "none")


@dataclass
class EncoderConfig(ConfigDict):
    """Everything that shapes an encoder. Defaults: BERT's recipe at a tiny size.

    ``type_vocab_size`` is the number of segments (BERT: 2; 0 means no segment
    embedding). ``final_norm`` None means "a final norm exactly when Pre-Norm"
    (a Post-Norm stack already ends in a norm). ``embed_scale`` multiplies the
    token embeddings (sqrt(d) in the 2017 Transformer, 1 in BERT).
    ``pad_token_id``: the token row whose gradient stays zero (PyTorch's ``padding_idx``;
    BERT's [PAD] is 0), None for none. ``pooler``: add BERT's pooler (``Pooler``).
    ``npformer.interop.from_hf`` sets both from a BERT checkpoint.
    """

    vocab_size: int = 50
    d_model: int = 8
    n_heads: int = 2
    n_kv_heads: int | None = None
    n_layers: int = 1
    max_len: int = 16
    type_vocab_size: int = 2
    positions: str = "learned"          # learned | sinusoidal | rope | none
    norm: str = "layernorm"             # layernorm | rmsnorm
    ffn: str = "gelu"                   # relu | gelu | gelu_tanh | swiglu
    ffn_hidden: int | None = None       # None: 4 * d_model
    prenorm: bool = False               # BERT is Post-Norm
    embed_norm: bool = True             # LayerNorm after summing the embeddings
    final_norm: bool | None = None      # None: = prenorm
    attn_bias: bool = True
    ffn_bias: bool = True
    norm_eps: float = 1e-12
    embed_scale: float = 1.0
    rope_theta: float = 10000.0        # RoPE's base (Rotary's ``base``), not an angle
    init_std: float = 0.02
    pad_token_id: int | None = None     # a frozen token row (torch's padding_idx)
    pooler: bool = False                # BERT's pooler: tanh(states[:, 0] W + b)

    @classmethod
    def bert(cls, **overrides):
        """BERT: learned positions, 2 segments, embedding LayerNorm, Post-Norm, exact GELU, biases."""
        return cls(**{**dict(positions="learned", type_vocab_size=2, norm="layernorm", ffn="gelu",
                             prenorm=False, embed_norm=True, attn_bias=True, ffn_bias=True,
                             norm_eps=1e-12), **overrides})

    def __post_init__(self):
        self.validate()

    def validate(self):
        """ValueError naming the first field the encoder cannot build."""
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "max_len"):
            check_positive(name, getattr(self, name))
        if not isinstance(self.type_vocab_size, (int, np.integer)) or self.type_vocab_size < 0:
            raise ValueError(f"type_vocab_size: expected an integer >= 0, got {self.type_vocab_size!r}")
        check_choice("positions", self.positions, ENCODER_POSITIONS)
        check_padding_idx("pad_token_id", self.pad_token_id, self.vocab_size)
        self.block_config()          # width / heads / norm / ffn checks, with their messages

    @property
    def use_final_norm(self):
        """Whether the stack ends in a norm (``final_norm``, or Pre-Norm when it is None)."""
        return self.prenorm if self.final_norm is None else self.final_norm

    def block_config(self):
        """The ``BlockConfig`` of every layer: the layer recipe, bidirectional (no causal rule)."""
        return BlockConfig.from_config(self, causal=False, rope=self.positions == "rope")


# -- the encoder ----------------------------------------------------------------------
@dataclass(frozen=True)
class EncoderCache(Cache):
    """The caches of the embeddings, every block and the final norm."""

    embed: Cache
    blocks: tuple
    final_norm: Cache | None

    def attention(self, layer=0):
        """Attention weights [B, H, N, N] of one layer."""
        return self.blocks[layer].attn.weights


class Encoder(Module):
    """The bidirectional encoder described by an ``EncoderConfig``.

    ``forward(ids, key_mask=None, segments=None) -> (states [B, N, d], cache)``;
    ``backward(d_states, cache)`` accumulates every gradient and returns None
    (ids are integers). The layers come from ``build_block``, bidirectional.

    Parameter names (in this order; absent parts are skipped):
    ``tokens.weight`` [V, d], ``positions.weight`` [max_len, d] (learned),
    ``segments.weight`` [type_vocab_size, d], ``embed_norm.gamma``/``.beta``,
    then per layer i:
    ``blocks.{i}.norm1.gamma``/``.beta`` (after attention in Post-Norm, before it in Pre-Norm),
    ``blocks.{i}.attn.qkv.weight`` [d, 3d] (columns [Q | K | V], x W layout) and ``.bias``,
    ``blocks.{i}.attn.out.weight`` [d, d] and ``.bias``,
    ``blocks.{i}.norm2.gamma``/``.beta`` (the FFN's norm),
    ``blocks.{i}.ffn.up.weight`` [d, hidden], ``.bias``, ``blocks.{i}.ffn.down.weight``, ``.bias``;
    finally ``final_norm.gamma``/``.beta`` (Pre-Norm), ``pooler.weight`` [d, d] and
    ``.bias`` (with ``config.pooler``).

    For BERT: tokens = word_embeddings, positions = position_embeddings,
    segments = token_type_embeddings, embed_norm = embeddings.LayerNorm,
    norm1 = attention.output.LayerNorm, norm2 = output.LayerNorm,
    ffn.up = intermediate.dense, ffn.down = output.dense, pooler = pooler.dense
    (weights transposed). ``rng``: the Generator every weight is drawn from (None:
    ``np.random.default_rng(0)``).
    """

    def __init__(self, config=None, rng=None, dtype=np.float32):
        config = EncoderConfig() if config is None else config
        if not isinstance(config, EncoderConfig):
            raise TypeError(f"config: expected an EncoderConfig or None, got {type(config).__name__}")
        config.validate()
        rng = check_rng(rng)
        self.config = config
        d, std = config.d_model, config.init_std
        self.tokens = Embedding(config.vocab_size, d, rng, std, dtype, config.pad_token_id)
        self.positions = position_table(config.positions, config.max_len, d, rng, std, dtype)
        self.segments = None
        if config.type_vocab_size:
            self.segments = Embedding(config.type_vocab_size, d, rng, std, dtype)
        block_config = config.block_config()
        self.embed_norm = build_norm(block_config, dtype) if config.embed_norm else None
        self.embed = Embeddings(self.tokens, self.positions, self.segments, self.embed_norm,
                                scale=config.embed_scale)
        self.blocks = [build_block(block_config, rng, dtype) for _ in range(config.n_layers)]
        self.final_norm = build_norm(block_config, dtype) if config.use_final_norm else None
        self.pooler = Pooler(d, rng, std, dtype) if config.pooler else None

    def forward(self, ids, key_mask=None, segments=None):
        """ids [B, N] -> (states [B, N, d], cache).

        ``key_mask`` [B, N] bool, True at real tokens: no position reads a
        padded one (padded positions still get states; ignore them).
        ``segments`` [B, N] integers in [0, type_vocab_size); default all 0.
        """
        c = self.config
        ids = check_token_ids("ids", ids, c.vocab_size)
        B, N = ids.shape
        key_mask = check_key_mask("key_mask", key_mask, (B, N))
        if self.positions is not None and N > c.max_len:
            raise ValueError(f"ids: sequence length {N} exceeds max_len {c.max_len}")
        if self.segments is None and segments is not None:
            raise ValueError("segments: this encoder has no segment embedding (type_vocab_size=0), "
                             "got segment ids")
        if segments is not None:
            segments = check_ids("segments", segments, c.type_vocab_size, "type_vocab_size")
            if segments.shape != (B, N):
                raise ValueError(f"segments: expected shape {(B, N)}, got {segments.shape}")

        x, embed = self.embed.forward(ids, np.arange(N), segments)      # [B, N, d]
        mask = None if key_mask is None else padding_mask(key_mask=key_mask)   # [B, 1, 1, N]
        blocks = []
        for block in self.blocks:
            x, block_cache = block.forward(x, mask)
            blocks.append(block_cache)
        final_cache = None
        if self.final_norm is not None:
            x, final_cache = self.final_norm.forward(x)
        return x, EncoderCache(embed, tuple(blocks), final_cache)

    def output_shape(self, cache):
        """[B, N, d]: the states' shape, which backward's d_out must have."""
        return cache.embed.tokens.ids.shape + (self.config.d_model,)

    def backward(self, d_out, cache):
        """Accumulates every parameter's gradient; ids have none, so returns None."""
        d_x = d_out
        if self.final_norm is not None:
            d_x = self.final_norm.backward(d_x, cache.final_norm)
        for block, block_cache in zip(reversed(self.blocks), reversed(cache.blocks)):
            d_x = block.backward(d_x, block_cache)
        return self.embed.backward(d_x, cache.embed)

    def sentence_vector(self, ids, key_mask=None, segments=None, normalize=True):
        """Inference convenience: mean over real tokens of the states [B, d], unit length if ``normalize``."""
        states, _ = self.forward(ids, key_mask, segments)
        vector, _ = mean_pool_forward(states, key_mask)
        return l2_normalize_forward(vector)[0] if normalize else vector

    def pool(self, ids, key_mask=None, segments=None):
        """Inference convenience: BERT's ``pooler_output`` [B, d] = tanh(states[:, 0] W + b).

        Needs ``config.pooler``. For training, call ``self.pooler.forward`` and
        ``.backward`` on the states (see the module docstring).
        """
        if self.pooler is None:
            raise ValueError("pool: this encoder has no pooler (EncoderConfig.pooler=False)")
        return self.pooler(self.forward(ids, key_mask, segments)[0])


# -- BERT's pooler -------------------------------------------------------------------------
@dataclass(frozen=True)
class PoolerCache(Cache):
    """What the pooler's backward needs: its Linear's cache, tanh's and the states' shape."""

    dense: Cache
    tanh: Cache
    shape: tuple          # the states' shape [B, N, d]


class Pooler(Linear):
    """states [B, N, d] -> pooler_output [B, d] = tanh(states[:, 0] W + b), BERT's pooler.

    It reads the first position only ([CLS]), through a Linear d -> d with a bias
    (``weight`` [d, d], x W layout, and ``bias`` [d]) and a tanh. Backward:
        d_h = d_pooled (1 - pooled^2);  d_W = states[:, 0]^T d_h;  d_b = sum_b d_h
        d_states[:, 0] = d_h W^T, and 0 at every other position.
    ``rng``: the Generator W is drawn from (None: ``np.random.default_rng(0)``).
    """

    def __init__(self, d, rng=None, std=0.02, dtype=np.float32):
        super().__init__(d, d, True, rng, std, dtype)

    def forward(self, states):
        """states [B, N, d] -> (tanh(states[:, 0] W + b) [B, d], cache)."""
        if not isinstance(states, np.ndarray) or states.ndim != 3:
            raise ValueError(f"states: expected an array [B, N, d], got shape {np.shape(states)}")
        h, dense = super().forward(states[:, 0])                        # [B, d]
        pooled, tanh = tanh_forward(h)                                  # [B, d]
        return pooled, PoolerCache(dense, tanh, states.shape)

    def output_shape(self, cache):
        """[B, d]: what backward's d_pooled must be (and the Linear's d_h inside it)."""
        return super().output_shape(cache.dense if isinstance(cache, PoolerCache) else cache)

    def backward(self, d_pooled, cache):
        """d_states [B, N, d] from d_pooled [B, d]: only position 0 gets a gradient."""
        d_h = tanh_backward(d_pooled, cache.tanh)                       # forward: tanh(h)
        d_first = super().backward(d_h, cache.dense)                    # forward: h = s0 W + b
        B, N, d = cache.shape
        # forward: only position 0 is read; the others receive no gradient
        return np.concatenate([d_first[:, None], np.zeros((B, N - 1, d), d_first.dtype)], axis=1)


# -- mean pooling over real tokens -----------------------------------------------------
@dataclass(frozen=True)
class MeanPoolCache(Cache):
    """The pooling weights: 1 / count at real tokens, 0 at padding."""

    weights: np.ndarray   # [B, N]: 1 / count at real tokens, 0 at padding


def mean_pool_forward(states, key_mask=None):
    """states [B, N, d] -> the mean over real tokens [B, d].

    v_b = sum_n m_bn s_bn / sum_n m_bn. A row without real tokens gives zeros.
    """
    B, N, _ = check_states("states", states).shape
    key_mask = check_key_mask("key_mask", key_mask, (B, N))
    real = np.ones((B, N), states.dtype) if key_mask is None else key_mask.astype(states.dtype)
    count = real.sum(axis=1, keepdims=True)                            # [B, 1]
    weights = real / np.maximum(count, 1)                              # [B, N]
    pooled = (weights[:, None, :] @ states)[:, 0]                      # [B, d]
    return pooled, MeanPoolCache(weights)


def mean_pool_backward(d_pooled, cache):
    """d_states [B, N, d] from d_pooled [B, d]."""
    # each real position receives d_pooled / count; padding receives 0
    return cache.weights[:, :, None] * d_pooled[:, None, :]            # [B, N, d]


# -- L2 normalisation --------------------------------------------------------------------
@dataclass(frozen=True)
class L2NormalizeCache(Cache):
    """The output, the length it was divided by, and where that length was clamped."""

    y: np.ndarray         # the output [..., d]
    length: np.ndarray    # max(|x|, eps), [..., 1]
    clamped: np.ndarray   # |x| < eps, [..., 1]: there y = x / eps, a plain scaling


def l2_normalize_forward(x, eps=1e-12):
    """x [..., d] -> x / max(|x|, eps) (PyTorch's F.normalize): unit length unless |x| < eps."""
    norm = np.sqrt(np.sum(x * x, axis=-1, keepdims=True))             # [..., 1]
    clamped = norm < eps
    length = np.where(clamped, x.dtype.type(eps), norm)
    y = x / length
    return y, L2NormalizeCache(y, length, clamped)


def l2_normalize_backward(d_out, cache):
    """d_x from d_out for y = x / |x|."""
    # forward: y = x / |x|; d_x = (d_out - y (y . d_out)) / |x|: only the part of d_out
    # across the sphere survives (where |x| < eps, y = x / eps is a plain scaling)
    y, length = cache.y, cache.length
    across = d_out - y * np.sum(y * d_out, axis=-1, keepdims=True)
    return np.where(cache.clamped, d_out, across) / length
