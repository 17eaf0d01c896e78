"""A decoder-only language model: embeddings (+ positions), blocks, final norm, LM head.

    ids [B, N] -> x [B, N, d] -> blocks -> norm -> logits [B, N, V]

``DecoderConfig()`` is the article's tiny decoder: vocabulary 50, width 8, 2 heads, one
block, max length 16, learned positions, GELU FFN of width 4d, LayerNorm, Pre-Norm, the
causal rule, and an LM head of its own that gives each of the V vocabulary entries a score.

Variants, each a config field: a head tied to the token table (``TiedHead``, GPT-2), RoPE
instead of a position table, RMSNorm, SwiGLU, grouped-query attention, a sliding window,
blockwise attention (``t18_flash_attention``) and Mixture-of-Experts FFNs (``t14_moe``,
whose router reads the key mask and adds a load-balancing loss; ``router_inputs`` and
``router_grads`` hand the blocks what it needs). ``DecoderConfig.gpt2(...)``,
``.llama(...)`` and ``.mixtral(...)`` give the common recipes.

Backward runs the same path in reverse: the head, the final norm, each block from the
last to the first, then the embeddings, every module adding into its parameters'
gradients (``d_x`` means dL/dx). A tied head and the token table are one Parameter, so
it receives both gradients.

No fast twins: the model runs as written on either track; its parts call the twins
named in their own files.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .t04_attention import padding_mask
from .t09_block import BlockConfig, build_block, build_norm
from .t01_embedding import Embedding, Embeddings, position_table
from .t13_kv_cache import KVCache
from .t02_linear import Linear, linear_backward, linear_forward
from .core.module import Cache, ConfigDict, Module
from .checkpoints.budget import check_model_fits, decoder_parameters
from .t14_moe import AUX_OBJECTIVES, RouterLoss, router_grads, router_inputs, router_loss
from .core.validate import (check_choice, check_key_mask, check_padding_idx, check_positions,
                            check_positive, check_rng, check_token_ids)

POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "none")


@dataclass
class DecoderConfig(ConfigDict):
    """Everything that shapes a decoder; saved as JSON beside checkpoints."""

    vocab_size: int = 50
    d_model: int = 8
    n_heads: int = 2
    n_kv_heads: int | None = None      # None: = n_heads (MHA); 1: MQA; between: GQA
    n_layers: int = 1
    max_len: int = 16
    positions: str = "learned"         # learned | sinusoidal | rope | alibi | none
    norm: str = "layernorm"            # layernorm | rmsnorm
    ffn: str = "gelu"                  # relu | gelu | gelu_tanh | swiglu
    ffn_hidden: int | None = None      # None: 4 * d_model
    prenorm: bool = True
    causal: bool = True
    tie_embeddings: bool = False
    attn_bias: bool = False
    ffn_bias: bool = True
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0        # RoPE's base (Rotary's ``base``), not an angle
    rope_layout: str = "half"
    rope_fraction: float = 1.0
    window: int | None = None          # sliding-window attention width
    attention: str = "plain"           # plain | flash (blockwise, memory linear in the length)
    init_std: float = 0.02
    n_experts: int = 0                 # 0: dense FFN; > 0: Mixture of Experts FFN (Mixtral-style)
    top_k: int = 2                     # experts per token when n_experts > 0
    moe_aux_weight: float = 0.01       # backward adds the gradient of moe_aux_weight * aux_loss
    moe_aux_objective: str = "per_layer"   # per_layer: sum of each layer's loss | pooled: Mixtral's
    pad_token_id: int | None = None    # a token row the lookup never updates (torch's padding_idx)

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
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "max_len"):
            check_positive(name, getattr(self, name))
        check_choice("positions", self.positions, POSITIONS)
        check_choice("moe_aux_objective", self.moe_aux_objective, AUX_OBJECTIVES)
        check_padding_idx("pad_token_id", self.pad_token_id, self.vocab_size)
        self.block_config()                  # heads, norm, ffn, window, kernel, experts

    def block_config(self):
        """The ``BlockConfig`` of every layer of this decoder (ALiBi's positions are its kernel's)."""
        if self.positions != "alibi":
            return BlockConfig.from_config(self, rope=self.positions == "rope")
        if self.attention != "plain":
            raise ValueError(f"attention: positions='alibi' adds its bias to the whole score table, "
                             f"expected attention='plain', got {self.attention!r}")
        return BlockConfig.from_config(self, attention="alibi")

    @property
    def head_dim(self):
        """D = d_model / n_heads."""
        return self.d_model // self.n_heads


@dataclass(frozen=True)
class DecoderCache(Cache):
    """The caches of one forward: the embeddings, every block, the final norm and the head."""

    embed: Cache
    blocks: tuple
    norm: Cache
    head: Cache
    router: RouterLoss | None = None    # a variant: the MoE load-balancing loss (t14_moe)

    @property
    def aux_loss(self):
        """The MoE load-balancing loss of this forward (0.0 when the FFNs are dense)."""
        return 0.0 if self.router is None else self.router.value

    def attention(self, layer=0):
        """Attention weights [B, H, N, M] of one layer."""
        return self.blocks[layer].attn.weights


class DecoderLM(Module):
    """The decoder-only language model described by a ``DecoderConfig``.

    Parameter names: ``tokens.weight``, ``positions.weight`` (learned positions),
    ``blocks.{i}.norm1.gamma``, ``blocks.{i}.attn.qkv.weight``,
    ``blocks.{i}.attn.out.weight``, ``blocks.{i}.ffn.up.weight`` ...,
    ``norm.gamma``, ``head.weight`` (absent when tied to ``tokens.weight``).
    ``rng``: the Generator every weight is drawn from, in that order (None:
    ``np.random.default_rng(0)``).
    """

    def __init__(self, config=None, rng=None, dtype=np.float32):
        config = DecoderConfig() if config is None else config
        if not isinstance(config, DecoderConfig):
            raise TypeError(f"config: expected a DecoderConfig or None, got {type(config).__name__}")
        config.validate()
        # counted before anything is built: a billion layers is refused now, not after hours
        check_model_fits("config", config, decoder_parameters(config), np.dtype(dtype).itemsize,
                         doing="to build (its weights and their gradients)")
        rng = check_rng(rng)
        self.config = config
        d, std = config.d_model, config.init_std
        self.tokens = Embedding(config.vocab_size, d, rng, std, dtype, config.pad_token_id)
        self.positions = position_table(config.positions, config.max_len, d, rng, std, dtype)
        self.embed = Embeddings(self.tokens, self.positions)
        block_config = config.block_config()
        self.blocks = [build_block(block_config, rng, dtype) for _ in range(config.n_layers)]
        self.norm = build_norm(block_config, dtype)
        if config.tie_embeddings:
            self.head = TiedHead(self.tokens)
        else:
            self.head = Linear(d, config.vocab_size, False, rng, std=std, dtype=dtype)

    def new_kv_cache(self, batch, capacity=None):
        """A preallocated KV cache for ``batch`` sequences of up to ``capacity`` positions."""
        c = self.config
        capacity = c.max_len if capacity is None else capacity
        return KVCache(c.n_layers, batch, c.n_kv_heads or c.n_heads, capacity, c.head_dim, self.dtype)

    def forward(self, ids, key_mask=None, positions=None, kv_cache=None):
        """ids [B, N] -> (logits [B, N, V], cache).

        ``key_mask`` [B, N] bool, True at real tokens (False at padding).
        ``positions`` [N] or [B, N] integers; default: 0..N-1 after the cached ones.
        ``kv_cache`` from ``new_kv_cache`` for incremental decoding (inference only).
        """
        ids, key_mask, positions = self._check_inputs(ids, key_mask, positions, kv_cache)
        padding = self._padding(key_mask, kv_cache, ids.shape[1])   # [B, 1, 1, M] or None
        x, embed = self.embed.forward(ids, positions)          # [B, N, d]
        blocks = []
        for i, block in enumerate(self.blocks):
            kv = None if kv_cache is None else kv_cache.layers[i]
            # {} for a dense FFN; a MoE router also reads which tokens are real (t14_moe)
            moe_inputs = router_inputs(block.ffn, key_mask)
            x, block_cache = block.forward(x, padding, positions, kv, **moe_inputs)
            blocks.append(block_cache)
        if kv_cache is not None:
            kv_cache.advance(ids.shape[1])
        h, norm = self.norm.forward(x)                         # [B, N, d]
        logits, head = self.head.forward(h)                    # [B, N, V]
        router = router_loss(blocks, self.config.moe_aux_objective)    # None unless MoE
        return logits, DecoderCache(embed, tuple(blocks), norm, head, router)

    def output_shape(self, cache):
        """[B, N, V]: the logits' shape, which backward's d_out must have."""
        return self.head.output_shape(cache.head)

    def backward(self, d_out, cache):
        """Accumulates every parameter's gradient; ids have none, so returns None. With MoE
        FFNs the load-balancing loss's gradient is added too (weight ``config.moe_aux_weight``)."""
        d_h = self.head.backward(d_out, cache.head)            # undoes logits = head(h)
        d_x = self.norm.backward(d_h, cache.norm)              # undoes h = norm(x)
        # {} per block for dense FFNs; the share of the pooled MoE loss a router receives
        moe_grads = router_grads(cache.router, len(self.blocks), self.config.moe_aux_weight)
        for i in reversed(range(len(self.blocks))):            # undoes x = block_i(x), last first
            d_x = self.blocks[i].backward(d_x, cache.blocks[i], **moe_grads[i])
        return self.embed.backward(d_x, cache.embed)           # undoes x = embed(ids, positions)

    # -- the checks behind forward ---------------------------------------------------------
    def _check_inputs(self, ids, key_mask, positions, kv_cache):
        c = self.config
        ids = check_token_ids("ids", ids, c.vocab_size)
        B, N = ids.shape
        key_mask = check_key_mask("key_mask", key_mask, (B, N))
        offset = 0
        if kv_cache is not None:
            kv_cache.check_fits(c.n_layers, B, c.n_kv_heads or c.n_heads, c.head_dim, self.dtype)
            kv_cache.check_room(N)
            offset = kv_cache.length
        name = "ids" if positions is None else "positions"        # who chose the positions
        positions = np.arange(offset, offset + N) if positions is None else positions
        max_len = c.max_len if self.positions is not None else None
        return ids, key_mask, check_positions(name, positions, max_len)

    def _padding(self, key_mask, kv_cache, n):
        """The padding part of the mask, [B, 1, 1, M]: cached positions keep their own."""
        if kv_cache is not None:
            key_mask = kv_cache.remember_key_mask(key_mask, n)
        return None if key_mask is None else padding_mask(key_mask=key_mask)


# -- a variant: the LM head tied to the token table (GPT-2) ----------------------------------
class TiedHead(Module):
    """logits = x E^T, reading the token embedding table E [V, d] (a shared Parameter)."""

    def __init__(self, embedding):
        self.weight = embedding.weight

    def forward(self, x):
        """x [..., d] -> (logits x E^T [..., V], cache)."""
        return linear_forward(x, self.weight.data.T)                # [..., V]

    def output_shape(self, cache):
        """[..., V]: what backward's d_out must be."""
        return cache.x.shape[:-1] + self.weight.shape[:1]

    def backward(self, d_out, cache):
        """d_x from d_logits; adds the head's share into the token table's gradient."""
        d_x, d_weight_t, _ = linear_backward(d_out, cache)          # undoes logits = x E^T
        self.weight.grad += d_weight_t.T                             # d_E = (x^T d_logits)^T
        return d_x
