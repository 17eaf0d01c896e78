"""The gradient-check cases: one small, random, float64 problem per public component.

``CASES[name](rng)`` returns ``(target, inputs, options)`` for ``gradcheck``.
Tests run every case in several shapes, ``npformer gradcheck`` prints the
table, and ``missing_cases()`` names any public component without a case.
Register a new one with ``@case("Name")``.
"""
from __future__ import annotations

import numpy as np

CASES = {}

# Public names that have nothing to differentiate, and why.
NOTHING_TO_CHECK = {
    "SinusoidalPositions": "a fixed table looked up by integer positions: no float input, no parameter",
    "Module": "the abstract base class",
    "Cache": "a record, not a computation",
}


def case(name):
    """Decorator: register ``builder(rng, size) -> (target, inputs, options)`` under ``name``."""
    def register(builder):
        CASES[name] = builder
        return builder
    return register


def public_components():
    """Every public Module subclass and function pair exported by ``npformer``."""
    import npformer
    from npformer.module import Module
    names = {name for name, obj in vars(npformer).items()
             if isinstance(obj, type) and issubclass(obj, Module) and not name.startswith("_")}
    # function pairs: every exported ``f_forward`` with an exported ``f_backward``
    names |= {name[:-len("_forward")] for name in vars(npformer)
              if name.endswith("_forward") and name[:-len("_forward")] + "_backward" in vars(npformer)}
    return sorted(names - set(NOTHING_TO_CHECK))


def missing_cases():
    """Public components without a registered gradient-check case (should be [])."""
    return [name for name in public_components() if name not in CASES]


def _shape(size):
    """(B, N, d, H) for size 0 (tiny), 1 (small) and 2 (wider, more heads)."""
    return [(1, 3, 4, 2), (2, 5, 8, 2), (2, 4, 12, 4)][size]


def _float(rng, *shape):
    return rng.standard_normal(shape)


# -- function pairs --------------------------------------------------------------------
@case("softmax")
def _(rng, size):
    from .functional import softmax_backward, softmax_forward
    B, N, d, H = _shape(size)
    mask = rng.random((B, N, d)) < 0.7
    mask[0, 0] = False                      # a fully masked row: zero weights, zero gradient
    return (softmax_forward, softmax_backward), (_float(rng, B, N, d),), {"mask": mask}


def _pair_case(name):
    @case(name)
    def builder(rng, size):
        from .functional import FUNCTION_PAIRS
        B, N, d, H = _shape(size)
        return FUNCTION_PAIRS[name], (2 * _float(rng, B, N, d),), {}
    return builder


for _name in ("log_softmax", "relu", "gelu", "gelu_tanh", "silu"):
    _pair_case(_name)


@case("attention")
def _(rng, size):
    from .attention import attention_backward, attention_forward, causal_mask, padding_mask
    B, N, d, H = _shape(size)
    D, H_kv = d // H, max(1, H // 2)
    mask = causal_mask(N)[None, None] & padding_mask(np.full(B, N - 1), N, side="left")
    return ((attention_forward, attention_backward),
            (_float(rng, B, H, N, D), _float(rng, B, H_kv, N, D), _float(rng, B, H_kv, N, D)),
            {"mask": mask})


@case("cross_entropy")
def _(rng, size):
    from .loss import cross_entropy_backward, cross_entropy_forward
    B, N, d, H = _shape(size)
    targets = rng.integers(0, d, (B, N))
    targets[0, 0] = -100                    # an ignored (padded) target
    return (cross_entropy_forward, cross_entropy_backward), (_float(rng, B, N, d), targets), {}


# -- modules -----------------------------------------------------------------------------
@case("Linear")
def _(rng, size):
    from .linear import Linear
    B, N, d, H = _shape(size)
    return Linear(d, d + 3, True, rng), (_float(rng, B, N, d),), {}


@case("Embedding")
def _(rng, size):
    from .embedding import Embedding
    B, N, d, H = _shape(size)
    ids = rng.integers(0, 5, (B, N))
    ids[0, :2] = 3                           # a repeated id accumulates
    return Embedding(7, d, rng), (ids,), {}


@case("LearnedPositions")
def _(rng, size):
    from .embedding import LearnedPositions
    B, N, d, H = _shape(size)
    return LearnedPositions(N + 2, d, rng), (np.arange(N),), {}


@case("Rotary")
def _(rng, size):
    from .rope import Rotary
    B, N, d, H = _shape(size)
    layout = ("half", "interleaved", "half")[size]
    fraction = (1.0, 1.0, 0.5)[size]
    return Rotary(d, layout=layout, fraction=fraction), (_float(rng, B, H, N, d),), \
        {"positions": np.arange(3, 3 + N)}


@case("MultiHeadAttention")
def _(rng, size):
    from .attention import MultiHeadAttention, causal_mask
    from .rope import Rotary
    B, N, d, H = _shape(size)
    H_kv = (H, 1, 2)[size]
    rope = Rotary(d // H) if size == 2 else None
    return (MultiHeadAttention(d, H, H_kv, bias=size == 1, rope=rope, rng=rng),
            (_float(rng, B, N, d),), {"mask": causal_mask(N)})


@case("FFN")
def _(rng, size):
    from .ffn import FFN
    B, N, d, H = _shape(size)
    return FFN(d, activation=("relu", "gelu", "gelu_tanh")[size], rng=rng), (_float(rng, B, N, d),), {}


@case("SwiGLU")
def _(rng, size):
    from .ffn import SwiGLU
    B, N, d, H = _shape(size)
    return SwiGLU(d, 3 * d, bias=size == 1, rng=rng), (_float(rng, B, N, d),), {}


@case("LayerNorm")
def _(rng, size):
    from .norm import LayerNorm
    B, N, d, H = _shape(size)
    return LayerNorm(d), (_float(rng, B, N, d),), {}


@case("RMSNorm")
def _(rng, size):
    from .norm import RMSNorm
    B, N, d, H = _shape(size)
    return RMSNorm(d), (_float(rng, B, N, d),), {}


def _block(kind, rng, size):
    from .attention import causal_mask
    from .model import DecoderConfig, build_block
    B, N, d, H = _shape(size)
    config = DecoderConfig(d_model=d, n_heads=H, prenorm=kind == "pre",
                           ffn=("gelu", "relu", "swiglu")[size])
    return build_block(config, rng, np.float64), (_float(rng, B, N, d),), {"mask": causal_mask(N)}


@case("PreNormBlock")
def _(rng, size):
    return _block("pre", rng, size)


@case("PostNormBlock")
def _(rng, size):
    return _block("post", rng, size)


@case("TiedHead")
def _(rng, size):
    from .embedding import Embedding
    from .model import TiedHead
    B, N, d, H = _shape(size)
    return TiedHead(Embedding(11, d, rng)), (_float(rng, B, N, d),), {}


@case("DecoderLM")
def _(rng, size):
    from .model import DecoderConfig, DecoderLM
    B, N, d, H = _shape(size)
    config = [DecoderConfig(d_model=d, n_heads=H, vocab_size=13),
              DecoderConfig.gpt2(d_model=d, n_heads=H, vocab_size=13, n_layers=2),
              DecoderConfig.llama(d_model=d, n_heads=H, n_kv_heads=2, vocab_size=13, n_layers=2)][size]
    ids = rng.integers(0, 13, (B, N))
    key_mask = np.ones((B, N), bool)
    key_mask[0, 0] = False                   # one left-padded position
    return DecoderLM(config, rng), (ids,), {"key_mask": key_mask}


# Cases of later components register themselves in these modules.
from . import checks_backbones, checks_flash, checks_variants  # noqa: E402,F401
