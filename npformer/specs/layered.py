"""Layers made of layers as functions whose weights are arguments: how their specs build them.

A layer component (a MoE layer, a block, the decoder) is called
``forward(*inputs, *weights, **recipe)``: its float inputs (or token ids), then one array per
parameter in ``named_parameters()`` order, then the recipe that builds the layer (widths,
heads, norm and FFN kinds...) and its call options (masks). Its spec gives ``build(d, recipe,
dtype)`` (npformer's module, its classes looked up at each call, so that a patched-in method
runs) and, where it takes fewer weights than the module has, ``weighted(named)`` (the names
and parameters it takes); ``loaded`` then builds the module with the weights in place, and
``weight_names`` says, for a drawn example, which weight is which ("blocks.0.attn.qkv.weight"),
so that a report names the wrong gradient.
"""
from __future__ import annotations

import functools

import numpy as np

from .registry import lookup


def rng():
    """The generator a layer is built with (its weights are then replaced)."""
    return np.random.default_rng(0)


def all_parameters(named):
    """All of a module's (name, Parameter): what most layers take."""
    return named


def weight_names(build, weighted, d, recipe):
    """[(name, shape)] of the weights a layer takes after its inputs, in order."""
    return _weight_names(build, weighted, d, tuple(sorted(recipe.items())))


@functools.lru_cache(maxsize=512)
def _weight_names(build, weighted, d, recipe):
    # a draw asks for the same few recipes again and again: build each one once
    module = build(d, dict(recipe), np.float64)
    return tuple((name, p.shape) for name, p in weighted(list(module.named_parameters())))


def loaded(build, weighted, d, recipe, weights, dtype):
    """(npformer's module with ``weights`` in its parameters, those parameters)."""
    module = build(d, recipe, dtype)
    named = weighted(list(module.named_parameters()))
    if len(weights) != len(named):
        raise TypeError(f"weights: expected {len(named)} arrays ({', '.join(n for n, _ in named)}), "
                        f"got {len(weights)}")
    for (name, p), w in zip(named, weights):
        if np.shape(w) != p.shape:
            raise ValueError(f"{name}: expected shape {p.shape}, got {np.shape(w)}")
        p.data[...] = w
    return module, [p for _, p in named]


def grads(params):
    """The gradients of a layer's parameters, in order."""
    return tuple(p.grad for p in params)


def block_config(d, recipe, **fixed):
    """npformer's BlockConfig of width ``d`` from a recipe's block fields."""
    keys = ("n_heads", "n_kv_heads", "norm", "ffn", "ffn_hidden", "ffn_bias", "attn_bias", "causal")
    return lookup("t09_block.BlockConfig")(d_model=d, **{k: recipe[k] for k in keys if k in recipe}, **fixed)
