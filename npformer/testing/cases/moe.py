"""Gradient-check cases of Mixture-of-Experts layers and models.

A MoE layer's backward differentiates <y, d_y> + aux_weight * aux, where aux is its
load-balancing loss. To check both paths with one upstream gradient, the cases wrap
the layer (or model) in ``WithAuxLoss``: its output is the layer's output with the aux
loss appended. The case draws the aux weight first, builds the layer with it, and hands
gradcheck an upstream gradient whose last entry is that weight.

The routing (which k experts a token uses) is piecewise constant: a finite difference
that crosses a top-k tie is meaningless. The cases therefore draw their own random
parameters (``randomize=False``) and redraw until every token's k-th and (k+1)-th
router probabilities differ by at least ``MIN_MARGIN``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...t10_model import DecoderConfig, DecoderLM
from ...core.module import Cache, Module
from ...t14_moe import MoE, MoECache
from .registry import case, left_padded, normal, shape

MIN_MARGIN = 1e-3


@dataclass(frozen=True)
class WithAuxCache(Cache):
    """The wrapped target's cache and its output's shape."""

    inner: Cache
    shape: tuple


def aux_weights(target):
    """The aux-loss weight of every MoE layer in ``target`` (a MoE or a model)."""
    return [m.aux_weight for m in target.modules() if isinstance(m, MoE)]


class WithAuxLoss(Module):
    """Check harness: ``forward`` -> [output.ravel(), aux loss]; ``backward`` is the target's
    own, which adds aux_weight times the aux loss's gradient: the last upstream entry must
    be that weight."""

    def __init__(self, target):
        self.target = target

    def forward(self, *inputs, **options):
        """The target's output, flattened, with its aux loss appended."""
        out, cache = self.target.forward(*inputs, **options)
        return np.append(out.ravel(), cache.aux_loss), WithAuxCache(cache, out.shape)

    def backward(self, d_out, cache):
        """The target's backward; the last upstream entry is the aux loss's: a MoE layer takes it
        as its ``d_aux``, a model's layers must have it as their aux weight."""
        if isinstance(self.target, MoE):
            return self.target.backward(d_out[:-1].reshape(cache.shape), cache.inner, d_aux=d_out[-1])
        if any(not np.isclose(w, d_out[-1], rtol=0, atol=1e-15) for w in aux_weights(self.target)):
            raise ValueError(f"d_out: its last entry (the aux loss's upstream) must equal the layers' "
                             f"aux_weight {aux_weights(self.target)}, got {d_out[-1]}")
        return self.target.backward(d_out[:-1].reshape(cache.shape), cache.inner)


def randomize(module, rng, scale=0.5):
    """Non-trivial float64 parameters: gamma != 1, biases != 0."""
    for p in module.parameters():
        p.data += scale * rng.standard_normal(p.shape)


def margins(cache):
    """Top-k margins of every MoE layer in a MoE or DecoderLM cache."""
    if isinstance(cache, MoECache):
        return [cache.top_k_margin]
    return [block.ffn.top_k_margin for block in cache.blocks if isinstance(block.ffn, MoECache)]


def away_from_ties(build, rng, tries=200):
    """Call ``build(rng, aux_weight) -> (target, inputs, options)`` until every routing margin
    is at least MIN_MARGIN; returns the ``WithAuxLoss`` case with its upstream gradient."""
    for _ in range(tries):
        aux_weight = float(rng.standard_normal())
        target, inputs, options = build(rng, aux_weight)
        out, cache = target.forward(*inputs, **options)
        if min(margins(cache)) >= MIN_MARGIN:
            upstream = np.append(rng.standard_normal(out.size), aux_weight)
            return WithAuxLoss(target), inputs, {**options, "randomize": False, "upstream": upstream}
    raise RuntimeError("no draw with routing margins >= MIN_MARGIN")  # pragma: no cover


@case("MoE")
def _(rng, size):
    B, N, d, H = shape(size)
    E, k, expert = [(2, 1, "gelu"), (4, 2, "swiglu"), (3, 2, "gelu_tanh")][size]

    def build(rng, aux_weight):
        moe = MoE(d, E, k, hidden=2 * d, expert=expert, bias=size != 1, aux_weight=aux_weight,
                  rng=rng, dtype=np.float64)
        randomize(moe, rng)
        padded = {"token_mask": left_padded(B, N)} if size == 2 else {}   # padding out of the statistics
        return moe, (normal(rng, B, N, d),), padded
    return away_from_ties(build, rng)


@case("DecoderLM (Mixtral)")
def _(rng, size):
    return _mixtral(rng, size, "per_layer")


@case("DecoderLM (Mixtral, pooled)")
def _(rng, size):
    return _mixtral(rng, size, "pooled")


def _mixtral(rng, size, objective):
    B, N, d, H = shape(size)
    recipe = [dict(n_kv_heads=1, n_experts=2, top_k=1),
              dict(n_layers=2, n_experts=4, top_k=2),
              dict(n_kv_heads=2, n_layers=2, n_experts=3, top_k=2, window=3)][size]

    def build(rng, aux_weight):
        make = DecoderConfig if size == 1 else DecoderConfig.mixtral
        extra = {"ffn": "gelu"} if size == 1 else {}
        config = make(d_model=d, n_heads=H, vocab_size=11, ffn_hidden=d, moe_aux_weight=aux_weight,
                      moe_aux_objective=objective, **recipe, **extra)
        model = DecoderLM(config, rng, np.float64)
        randomize(model, rng)
        return model, (rng.integers(0, 11, (B, N)),), {"key_mask": left_padded(B, N)}
    return away_from_ties(build, rng)
