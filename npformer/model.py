"""A decoder-only language model: embeddings (+ positions), blocks, final norm, LM head.

ids [B, N] -> x [B, N, d] -> blocks -> norm -> logits [B, N, V]

``DecoderConfig()`` is the tutorial's tiny decoder: vocabulary 50, width 8,
2 heads, one block, max length 16, learned positions, GELU FFN of width 4d,
LayerNorm, Pre-Norm, causal mask. ``DecoderConfig.gpt2(...)`` and
``DecoderConfig.llama(...)`` give the two common modern recipes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .attention import MultiHeadAttention, causal_mask, padding_mask, sliding_window_mask
from .block import PostNormBlock, PreNormBlock
from .embedding import Embedding, position_table
from .ffn import FFN, SwiGLU
from .kv_cache import KVCache
from .linear import Linear
from .module import Cache, ConfigDict, Module, check_ids, check_window
from .moe import MoE
from .norm import NORMS
from .rope import Rotary

POSITIONS = ("learned", "sinusoidal", "rope", "none")
FFNS = ("relu", "gelu", "gelu_tanh", "swiglu")


@dataclass
class DecoderConfig(ConfigDict):
    """Everything that shapes a decoder; saved as JSON beside checkpoints."""

    vocab_size: int = 50
    d_model: int = 8
    n_heads: int = 2
    n_kv_heads: int | None = None      # None: = n_heads (MHA); 1: MQA; between: GQA
    n_layers: int = 1
    max_len: int = 16
    positions: str = "learned"         # learned | sinusoidal | rope | none
    norm: str = "layernorm"            # layernorm | rmsnorm
    ffn: str = "gelu"                  # relu | gelu | gelu_tanh | swiglu
    ffn_hidden: int | None = None      # None: 4 * d_model
    prenorm: bool = True
    causal: bool = True
    tie_embeddings: bool = False
    attn_bias: bool = False
    ffn_bias: bool = True
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_layout: str = "half"
    rope_fraction: float = 1.0
    window: int | None = None          # sliding-window attention width
    attention: str = "plain"           # plain | flash (blockwise, memory linear in the length)
    init_std: float = 0.02
    n_experts: int = 0                 # 0: dense FFN; > 0: Mixture of Experts FFN (Mixtral-style)
    top_k: int = 2                     # experts per token when n_experts > 0
    moe_aux_weight: float = 0.01       # backward adds the gradient of moe_aux_weight * sum of aux losses

    @classmethod
    def gpt2(cls, **overrides):
        """Learned positions, LayerNorm, tanh GELU, biases, tied head."""
        return cls(**{**dict(positions="learned", norm="layernorm", ffn="gelu_tanh",
                             attn_bias=True, ffn_bias=True, tie_embeddings=True), **overrides})

    @classmethod
    def llama(cls, **overrides):
        """RoPE, RMSNorm, SwiGLU, no biases, untied head (set n_kv_heads for GQA)."""
        return cls(**{**dict(positions="rope", norm="rmsnorm", ffn="swiglu", attn_bias=False,
                             ffn_bias=False, tie_embeddings=False, norm_eps=1e-6), **overrides})

    @classmethod
    def mixtral(cls, **overrides):
        """The Llama recipe with every FFN a Mixture of 8 SwiGLU experts, top-2 routing."""
        return cls.llama(**{**dict(n_experts=8, top_k=2), **overrides})

    def __post_init__(self):
        self.validate()

    def validate(self):
        """ValueError naming the first field that cannot describe a decoder."""
        self.check_positive("vocab_size", "d_model", "n_heads", "n_layers", "max_len")
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads: d_model={self.d_model} must be divisible by n_heads, "
                             f"got n_heads={self.n_heads}")
        kv = self.n_heads if self.n_kv_heads is None else self.n_kv_heads
        if kv < 1 or self.n_heads % kv:
            raise ValueError(f"n_kv_heads: n_heads={self.n_heads} must be divisible by "
                             f"n_kv_heads, got {self.n_kv_heads}")
        for name, allowed in (("positions", POSITIONS), ("norm", tuple(NORMS)), ("ffn", FFNS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}: expected one of {allowed}, got {getattr(self, name)!r}")
        check_window(self.window)
        if self.attention not in MultiHeadAttention.ATTENTIONS:
            raise ValueError(f"attention: expected one of {MultiHeadAttention.ATTENTIONS}, "
                             f"got {self.attention!r}")
        if not isinstance(self.n_experts, (int, np.integer)) or self.n_experts < 0:
            raise ValueError(f"n_experts: expected an integer >= 0 (0 = dense FFN), got {self.n_experts!r}")
        if self.n_experts and (not isinstance(self.top_k, (int, np.integer))
                               or not 1 <= self.top_k <= self.n_experts):
            raise ValueError(f"top_k: expected an integer in [1, n_experts={self.n_experts}], "
                             f"got {self.top_k!r}")

    @property
    def head_dim(self):
        return self.d_model // self.n_heads


@dataclass(frozen=True)
class TiedHeadCache(Cache):
    x: np.ndarray


class TiedHead(Module):
    """logits = x E^T, reading the token embedding table E [V, d] (a shared Parameter)."""

    def __init__(self, embedding):
        self.weight = embedding.weight

    def forward(self, x):
        V, d = self.weight.shape
        logits = x.reshape(-1, d) @ self.weight.data.T            # one 2-D GEMM: [B*N, V]
        return logits.reshape(x.shape[:-1] + (V,)), TiedHeadCache(x)

    def backward(self, d_logits, cache):
        V, d = self.weight.shape
        d_rows = d_logits.reshape(-1, V)                           # [B*N, V]
        self.weight.grad += d_rows.T @ cache.x.reshape(-1, d)      # dE = dlogits^T x
        return (d_rows @ self.weight.data).reshape(cache.x.shape)  # dx = dlogits E


@dataclass(frozen=True)
class DecoderCache(Cache):
    tokens: Cache
    positions: Cache | None
    blocks: tuple
    norm: Cache
    head: Cache

    def attention(self, layer=0):
        """Attention weights [B, H, N, M] of one layer."""
        return self.blocks[layer].attn.weights

    @property
    def aux_loss(self):
        """Sum of the MoE layers' load-balancing losses in this forward (0.0 if dense).

        Training loss = CE + config.moe_aux_weight * aux_loss; ``DecoderLM.backward``
        already includes the second term's gradient (each MoE layer adds it).
        """
        return float(sum(getattr(block.ffn, "aux_loss", 0.0) for block in self.blocks))


def build_block(config, rng, dtype):
    """One block as the config describes it (used by every backbone)."""
    d = config.d_model
    out_std = config.init_std / np.sqrt(2 * config.n_layers)
    rope = None
    if config.positions == "rope":
        rope = Rotary(config.head_dim, config.rope_theta, config.rope_layout, config.rope_fraction)
    attn = MultiHeadAttention(d, config.n_heads, config.n_kv_heads, config.attn_bias, rope,
                              config.window, rng, dtype, out_std=out_std,
                              attention=config.attention, causal=config.causal)
    if config.n_experts:
        ffn = MoE(d, config.n_experts, config.top_k, config.ffn_hidden, config.ffn, config.ffn_bias,
                  config.moe_aux_weight, rng, dtype, out_std=out_std)
    elif config.ffn == "swiglu":
        ffn = SwiGLU(d, config.ffn_hidden, config.ffn_bias, rng, dtype, out_std=out_std)
    else:
        ffn = FFN(d, config.ffn_hidden, 4, config.ffn, config.ffn_bias, rng, dtype, out_std=out_std)
    norm = NORMS[config.norm]
    block = PreNormBlock if config.prenorm else PostNormBlock
    return block(attn, ffn, norm(d, config.norm_eps, dtype), norm(d, config.norm_eps, dtype))


class DecoderLM(Module):
    """The decoder-only language model described by a ``DecoderConfig``.

    Parameter names: ``tokens.weight``, ``positions.weight`` (learned positions),
    ``blocks.{i}.norm1.gamma``, ``blocks.{i}.attn.qkv.weight``,
    ``blocks.{i}.attn.out.weight``, ``blocks.{i}.ffn.up.weight`` ...,
    ``norm.gamma``, ``head.weight`` (absent when tied to ``tokens.weight``).
    """

    def __init__(self, config=None, rng=None, dtype=np.float32):
        config = DecoderConfig() if config is None else config
        config.validate()
        rng = np.random.default_rng(0) if rng is None else rng
        self.config = config
        d, std = config.d_model, config.init_std
        self.tokens = Embedding(config.vocab_size, d, rng, std, dtype)
        self.positions = position_table(config.positions, config.max_len, d, rng, std, dtype)
        self.blocks = [build_block(config, rng, dtype) for _ in range(config.n_layers)]
        self.norm = NORMS[config.norm](d, config.norm_eps, dtype)
        if config.tie_embeddings:
            self.head = TiedHead(self.tokens)
        else:
            self.head = Linear(d, config.vocab_size, False, rng, std=std, dtype=dtype)

    def new_kv_cache(self, batch, capacity=None):
        """A preallocated KV cache for ``batch`` sequences of up to ``capacity`` positions."""
        c = self.config
        capacity = c.max_len if capacity is None else capacity
        return KVCache(c.n_layers, batch, c.n_kv_heads or c.n_heads, capacity, c.head_dim, self.dtype)

    def mask(self, n, m, key_mask=None):
        """The boolean "may read" mask [B or 1, 1, n, m]: causal (and window) and padding.

        With ``attention="flash"`` only the padding part [B, 1, 1, m] (or None): the
        blockwise attention applies the causal and window limits itself, tile by tile.
        """
        c = self.config
        if c.attention == "flash":
            return None if key_mask is None else padding_mask(key_mask=key_mask)
        if not c.causal:
            allowed = np.ones((n, m), bool)
        elif c.window is not None:
            allowed = sliding_window_mask(n, c.window, m)
        else:
            allowed = causal_mask(n, m)
        allowed = allowed[None, None]
        if key_mask is not None:
            allowed = allowed & padding_mask(key_mask=key_mask)
        return allowed

    def forward(self, ids, key_mask=None, positions=None, kv_cache=None):
        """ids [B, N] -> (logits [B, N, V], cache).

        ``key_mask`` [B, N] bool, True at real tokens (False at padding).
        ``positions`` [N] or [B, N] integers; default: 0..N-1 after the cached ones.
        ``kv_cache`` from ``new_kv_cache`` for incremental decoding (inference only).
        """
        c = self.config
        ids = check_ids("ids", ids, c.vocab_size)
        if ids.ndim != 2:
            raise ValueError(f"ids: expected a [B, N] array of token ids, got shape {ids.shape}")
        B, N = ids.shape
        offset = 0
        if kv_cache is not None:
            if len(kv_cache.layers) != c.n_layers or kv_cache.k.shape[1] != B or \
                    kv_cache.k.shape[2] != (c.n_kv_heads or c.n_heads) or \
                    kv_cache.k.shape[4] != c.head_dim or kv_cache.k.dtype != self.dtype:
                raise ValueError(f"kv_cache: shape {kv_cache.k.shape} {kv_cache.k.dtype} does not fit "
                                 f"this model and batch {B} (a cache from a different model?)")
            kv_cache.check_room(N)
            offset = kv_cache.length
        if key_mask is not None:
            key_mask = np.asarray(key_mask)
            if key_mask.shape != (B, N) or key_mask.dtype != bool:
                raise ValueError(f"key_mask: expected a boolean array of shape {(B, N)}, "
                                 f"got {key_mask.dtype} of shape {key_mask.shape}")
        if positions is None:
            positions = np.arange(offset, offset + N)
        positions = np.asarray(positions)
        if self.positions is not None and positions.size and positions.max() >= c.max_len:
            raise ValueError(f"ids: sequence reaches position {positions.max()} but max_len is "
                             f"{c.max_len}")
        if kv_cache is not None:
            if key_mask is not None:
                kv_cache.key_mask[:, offset:offset + N] = key_mask
            key_mask = kv_cache.key_mask[:, :offset + N]
        mask = self.mask(N, offset + N, key_mask)

        x, tok_cache = self.tokens.forward(ids)                      # [B, N, d]
        pos_cache = None
        if self.positions is not None:
            pos, pos_cache = self.positions.forward(positions)       # [N, d] or [B, N, d]
            x = x + pos
        block_caches = []
        for i, block in enumerate(self.blocks):
            kv = None if kv_cache is None else kv_cache.layers[i]
            x, bc = block.forward(x, mask, positions, kv)
            block_caches.append(bc)
        if kv_cache is not None:
            kv_cache.advance(N)
        h, norm_cache = self.norm.forward(x)
        logits, head_cache = self.head.forward(h)                   # [B, N, V]
        return logits, DecoderCache(tok_cache, pos_cache, tuple(block_caches), norm_cache, head_cache)

    def backward(self, d_logits, cache):
        """Accumulates every parameter's gradient; ids have none, so returns None."""
        d_x = self.norm.backward(self.head.backward(d_logits, cache.head), cache.norm)
        for block, bc in zip(reversed(self.blocks), reversed(cache.blocks)):
            d_x = block.backward(d_x, bc)
        if self.positions is not None:
            d_pos = d_x if cache.positions.ids.ndim == 2 else d_x.sum(axis=0)
            self.positions.backward(d_pos, cache.positions)
        self.tokens.backward(d_x, cache.tokens)
        return None
