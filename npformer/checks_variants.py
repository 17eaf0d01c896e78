"""Gradient-check cases of the modern variants (MoE, encoder, encoder-decoder, ...); see checks.py.

A MoE layer's backward differentiates <y, d_y> + aux_weight * aux, where aux is its
load-balancing loss. To check both paths with one random upstream gradient, the
cases wrap the layer (or model) in ``WithAuxLoss``: its output is the layer's output
with the aux loss appended, so gradcheck's random upstream weighs both.

The routing (which k experts a token uses) is piecewise constant: a finite
difference that crosses a top-k tie is meaningless. The cases therefore draw
their own random parameters (``randomize=False``) and redraw until every token's
k-th and (k+1)-th router probabilities differ by at least ``MIN_MARGIN``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checks import _float, _shape, case
from .module import Cache, Module

MIN_MARGIN = 1e-3


@dataclass(frozen=True)
class WithAuxCache(Cache):
    inner: Cache
    shape: tuple


class WithAuxLoss(Module):
    """Check harness: ``forward`` -> [output.ravel(), aux loss]; ``backward`` feeds the
    last upstream entry to every MoE layer as the aux loss's upstream gradient."""

    def __init__(self, target):
        self.target = target

    def forward(self, *inputs, **options):
        out, cache = self.target.forward(*inputs, **options)
        return np.append(out.ravel(), cache.aux_loss), WithAuxCache(cache, out.shape)

    def backward(self, d_out, cache):
        from .moe import MoE
        d_main, d_aux = d_out[:-1].reshape(cache.shape), float(d_out[-1])
        if isinstance(self.target, MoE):
            return self.target.backward(d_main, cache.inner, d_aux=d_aux)
        # A model's backward uses each layer's aux_weight: set it to d_aux for this call.
        layers = [m for m in self.target.modules() if isinstance(m, MoE)]
        saved = [m.aux_weight for m in layers]
        try:
            for m in layers:
                m.aux_weight = d_aux
            return self.target.backward(d_main, cache.inner)
        finally:
            for m, w in zip(layers, saved):
                m.aux_weight = w


def _randomize(module, rng, scale=0.5):
    """Non-trivial float64 parameters: gamma != 1, biases != 0."""
    for p in module.parameters():
        p.data += scale * rng.standard_normal(p.shape)


def _margins(cache):
    """Top-k margins of every MoE layer in a MoE or DecoderLM cache."""
    from .moe import MoECache
    if isinstance(cache, MoECache):
        return [cache.top_k_margin]
    return [block.ffn.top_k_margin for block in cache.blocks if isinstance(block.ffn, MoECache)]


def _away_from_ties(build, rng, tries=200):
    """Call ``build(rng) -> (target, inputs, options)`` until every routing margin >= MIN_MARGIN."""
    for _ in range(tries):
        target, inputs, options = build(rng)
        _, cache = target.forward(*inputs, **options)
        if min(_margins(cache)) >= MIN_MARGIN:
            return WithAuxLoss(target), inputs, {**options, "randomize": False}
    raise RuntimeError("no draw with routing margins >= MIN_MARGIN")  # pragma: no cover


@case("MoE")
def _(rng, size):
    from .moe import MoE
    B, N, d, H = _shape(size)
    E, k, expert = [(2, 1, "gelu"), (4, 2, "swiglu"), (3, 2, "gelu_tanh")][size]

    def build(rng):
        moe = MoE(d, E, k, hidden=2 * d, expert=expert, bias=size != 1, rng=rng, dtype=np.float64)
        _randomize(moe, rng)
        return moe, (_float(rng, B, N, d),), {}
    return _away_from_ties(build, rng)


@case("DecoderLM (Mixtral)")
def _(rng, size):
    from .model import DecoderConfig, DecoderLM
    B, N, d, H = _shape(size)
    config = [DecoderConfig.mixtral(d_model=d, n_heads=H, n_kv_heads=1, vocab_size=11,
                                    n_experts=2, top_k=1, ffn_hidden=d),
              DecoderConfig(d_model=d, n_heads=H, vocab_size=11, n_layers=2, n_experts=4,
                            top_k=2, ffn="gelu", ffn_hidden=d),
              DecoderConfig.mixtral(d_model=d, n_heads=H, n_kv_heads=2, vocab_size=11, n_layers=2,
                                    n_experts=3, top_k=2, ffn_hidden=d, window=3)][size]

    def build(rng):
        model = DecoderLM(config, rng, np.float64)
        _randomize(model, rng)
        key_mask = np.ones((B, N), bool)
        key_mask[0, 0] = False                   # one left-padded position
        return model, (rng.integers(0, 11, (B, N)),), {"key_mask": key_mask}
    return _away_from_ties(build, rng)
