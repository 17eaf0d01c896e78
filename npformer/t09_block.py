"""Transformer blocks: attention (between positions) + FFN (within each position),
each wrapped in a residual connection and a normalisation.

The article's block is Pre-Norm (GPT-2, Llama); Post-Norm (the 2017 Transformer, BERT) is
the variant that normalises after each residual sum:

    Pre-Norm:   h = x + Attn(Norm1(x));   y = h + FFN(Norm2(h))
    Post-Norm:  h = Norm1(x + Attn(x));   y = Norm2(h + FFN(h))

Backward: a residual y = x + f(x) passes d_y to x unchanged and adds f's gradient,
d_x = d_y + f'(x)^T d_y (``d_x`` means dL/dx); that untouched path is why deep Pre-Norm
stacks train.

``BlockConfig`` is the recipe of one block (widths, heads, norm, FFN kind, causality,
RoPE, attention kernel, experts); the three model configs produce one, and
``build_block`` turns it into modules.

No fast twins: the blocks run as written on either track (a ``print`` in them shows);
their parts call the twins named in ``t02_linear.py``, ``t04_attention.py``,
``t07_ffn.py`` and ``t08_norm.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from .t04_attention import ATTENTION_KERNELS, MultiHeadAttention
from .t07_ffn import FFN, SwiGLU
from .t06_activations import ACTIVATIONS
from .core.module import Cache, Module
from .t14_moe import MoE
from .t08_norm import NORMS
from .t05_rope import LAYOUTS as ROPE_LAYOUTS, Rotary
from .core.validate import (check_choice, check_eps, check_heads, check_non_negative,
                            check_optional_positive, check_positive, check_window)

FFNS = ("relu", "gelu", "gelu_tanh", "swiglu")


@dataclass(frozen=True)
class BlockCache(Cache):
    """The caches of a block's two norms, its attention and its FFN."""

    norm1: Cache
    attn: Cache
    norm2: Cache
    ffn: Cache


class PreNormBlock(Module):
    """x [B, N, d] -> [B, N, d]: h = x + Attn(Norm1(x)); y = h + FFN(Norm2(h)).

    ``attn`` takes (x, mask, positions, kv): ``mask`` and ``positions`` go to the attention,
    ``kv`` is one layer of a KV cache (``t13_kv_cache``). ``ffn`` is any position-wise
    d -> d module. A variant's FFN may need more than x: whatever else ``forward`` (or
    ``backward``) receives by keyword goes to the FFN unchanged (the MoE router's
    ``token_mask`` and ``d_mean_probs``, ``t14_moe``).
    """

    def __init__(self, attn, ffn, norm1, norm2):
        self.norm1, self.attn, self.norm2, self.ffn = norm1, attn, norm2, ffn

    def forward(self, x, mask=None, positions=None, kv=None, **ffn_inputs):
        """x [B, N, d] -> (y [B, N, d], cache)."""
        a, norm1 = self.norm1.forward(x)                                # [B, N, d]
        attended, attn = self.attn.forward(a, mask, positions, kv)
        h = x + attended                                                # residual 1
        f, norm2 = self.norm2.forward(h)
        fed, ffn = self.ffn.forward(f, **ffn_inputs)
        y = h + fed                                                     # residual 2
        return y, BlockCache(norm1, attn, norm2, ffn)

    def backward(self, d_out, cache, **ffn_grads):
        """d_x from d_out [B, N, d]; ``ffn_grads`` go to a variant's FFN (see the class)."""
        d_f = self.ffn.backward(d_out, cache.ffn, **ffn_grads)     # undoes fed = FFN(f)
        d_h = d_out + self.norm2.backward(d_f, cache.norm2)         # undoes y = h + fed, f = Norm2(h)
        d_a = self.attn.backward(d_h, cache.attn)                   # undoes attended = Attn(a)
        return d_h + self.norm1.backward(d_a, cache.norm1)          # undoes h = x + attended, a = Norm1(x)


class PostNormBlock(PreNormBlock):
    """x [B, N, d] -> [B, N, d], normalising after each residual sum (the 2017 layout):
    h = Norm1(x + Attn(x)); y = Norm2(h + FFN(h))."""

    def forward(self, x, mask=None, positions=None, kv=None, **ffn_inputs):
        """x [B, N, d] -> (y [B, N, d], cache)."""
        attended, attn = self.attn.forward(x, mask, positions, kv)     # [B, N, d]
        h, norm1 = self.norm1.forward(x + attended)                     # residual 1, then Norm1
        fed, ffn = self.ffn.forward(h, **ffn_inputs)
        y, norm2 = self.norm2.forward(h + fed)                          # residual 2, then Norm2
        return y, BlockCache(norm1, attn, norm2, ffn)

    def backward(self, d_out, cache, **ffn_grads):
        """d_x from d_out [B, N, d], through Norm2, the FFN, Norm1 and the attention."""
        d_sum2 = self.norm2.backward(d_out, cache.norm2)                # undoes y = Norm2(h + fed)
        d_h = d_sum2 + self.ffn.backward(d_sum2, cache.ffn, **ffn_grads)   # undoes fed = FFN(h)
        d_sum1 = self.norm1.backward(d_h, cache.norm1)                  # undoes h = Norm1(x + attended)
        return d_sum1 + self.attn.backward(d_sum1, cache.attn)          # undoes attended = Attn(x)


# -- from a recipe to modules --------------------------------------------------------------
@dataclass(frozen=True)
class BlockConfig:
    """The recipe of one block, validated when made; ``DecoderConfig.block_config()`` and
    the encoder and encoder-decoder configs produce it."""

    d_model: int
    n_heads: int
    n_kv_heads: int | None = None      # None: = n_heads (MHA); 1: MQA; between: GQA
    n_layers: int = 1                  # the depth: the output projections start smaller in deep stacks
    norm: str = "layernorm"
    norm_eps: float = 1e-5
    ffn: str = "gelu"                  # relu | gelu | gelu_tanh | swiglu
    ffn_hidden: int | None = None      # None: 4 * d_model
    ffn_bias: bool = True
    attn_bias: bool = False
    prenorm: bool = True
    causal: bool = True
    window: int | None = None
    rope: bool = False
    rope_theta: float = 10000.0        # RoPE's base (Rotary's ``base``), not an angle
    rope_layout: str = "half"
    rope_fraction: float = 1.0
    attention: str = "plain"           # plain | flash
    init_std: float = 0.02
    n_experts: int = 0                 # > 0: a Mixture of Experts FFN
    top_k: int = 2
    moe_aux_weight: float = 0.01

    def __post_init__(self):
        check_positive("d_model", self.d_model)
        check_positive("n_layers", self.n_layers)
        check_heads(self.d_model, self.n_heads, self.n_kv_heads, width="d_model")
        check_choice("norm", self.norm, tuple(NORMS))
        check_eps("norm_eps", self.norm_eps)
        check_choice("ffn", self.ffn, FFNS)
        check_optional_positive("ffn_hidden", self.ffn_hidden, "4 * d_model")
        check_non_negative("init_std", self.init_std)
        check_eps("rope_theta", self.rope_theta)
        check_choice("rope_layout", self.rope_layout, ROPE_LAYOUTS)
        if not (isinstance(self.rope_fraction, (int, float)) and 0 < self.rope_fraction <= 1):
            raise ValueError(f"rope_fraction: expected a number in (0, 1], got {self.rope_fraction!r}")
        if not (isinstance(self.moe_aux_weight, (int, float, np.floating))
                and np.isfinite(self.moe_aux_weight)):     # any sign: gradient checks draw it
            raise ValueError(f"moe_aux_weight: expected a finite number, got {self.moe_aux_weight!r}")
        check_choice("attention", self.attention, tuple(ATTENTION_KERNELS))
        check_window(self.window)
        if self.window is not None and not self.causal:
            raise ValueError(f"window: a sliding window limits causal attention, got window="
                             f"{self.window} with causal=False")
        if isinstance(self.n_experts, bool) or not isinstance(self.n_experts, (int, np.integer)) \
                or self.n_experts < 0:
            raise ValueError(f"n_experts: expected an integer >= 0 (0 = dense FFN), got {self.n_experts!r}")
        if self.n_experts and (not isinstance(self.top_k, (int, np.integer))
                               or not 1 <= self.top_k <= self.n_experts):
            raise ValueError(f"top_k: expected an integer in [1, n_experts={self.n_experts}], "
                             f"got {self.top_k!r}")

    @classmethod
    def from_config(cls, config, **overrides):
        """The recipe of a model config's layers: every field of the same name, then
        ``overrides`` (what the model decides itself: causality, RoPE, the depth)."""
        shared = {f.name: getattr(config, f.name) for f in fields(cls) if hasattr(config, f.name)}
        return cls(**{**shared, **overrides})

    @property
    def head_dim(self):
        """D = d_model / n_heads."""
        return self.d_model // self.n_heads

    @property
    def out_std(self):
        """Init std of the projections that write into the residual stream (GPT-2's 1/sqrt(2 L))."""
        return self.init_std / np.sqrt(2 * self.n_layers)


def build_attention(config, rng, dtype):
    """The self-attention a ``BlockConfig`` describes (kernel, causality, RoPE, GQA)."""
    rope = None
    if config.rope:
        rope = Rotary(config.head_dim, base=config.rope_theta, layout=config.rope_layout,
                      fraction=config.rope_fraction)
    return MultiHeadAttention(config.d_model, config.n_heads, config.n_kv_heads, config.attn_bias,
                              rope=rope, window=config.window, rng=rng, dtype=dtype,
                              out_std=config.out_std, kernel=ATTENTION_KERNELS[config.attention](),
                              causal=config.causal)


def build_ffn(config, rng, dtype):
    """The position-wise network a ``BlockConfig`` describes: FFN, SwiGLU or a MoE of either."""
    d, out_std = config.d_model, config.out_std
    if config.n_experts:
        return MoE(d, config.n_experts, config.top_k, hidden=config.ffn_hidden, expert=config.ffn,
                   bias=config.ffn_bias, aux_weight=config.moe_aux_weight, rng=rng, dtype=dtype,
                   out_std=out_std)
    if config.ffn == "swiglu":
        return SwiGLU(d, config.ffn_hidden, bias=config.ffn_bias, rng=rng, dtype=dtype, out_std=out_std)
    check_choice("ffn", config.ffn, tuple(ACTIVATIONS))
    return FFN(d, config.ffn_hidden, activation=config.ffn, bias=config.ffn_bias, rng=rng, dtype=dtype,
               out_std=out_std)


def build_norm(config, dtype):
    """One norm of the kind and eps a ``BlockConfig`` names."""
    return NORMS[config.norm](config.d_model, config.norm_eps, dtype)


def build_block(config, rng, dtype=np.float32):
    """One block as ``config`` describes it (a ``BlockConfig``, or a model config that makes one)."""
    if not isinstance(config, BlockConfig):
        config = config.block_config()
    block = PreNormBlock if config.prenorm else PostNormBlock
    return block(build_attention(config, rng, dtype), build_ffn(config, rng, dtype),
                 build_norm(config, dtype), build_norm(config, dtype))
