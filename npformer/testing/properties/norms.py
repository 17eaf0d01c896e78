"""Properties of LayerNorm, RMSNorm and the SwiGLU network."""
from __future__ import annotations

import numpy as np

from .registry import _upstream, close, prop


@prop("layernorm", "with gamma = 1 and beta = 0 each position gets mean 0 and variance 1 "
                   "(with eps -> 0)")
def layernorm_standardises(subject, example):
    x = example.args[0]
    d = x.shape[-1]
    if d < 2 or (x.std(axis=-1) < 0.1).any():
        return                      # a constant row has no variance to bring to 1
    y = subject.output((x, np.ones(d), np.zeros(d)), {**example.options, "eps": 1e-12})
    close("means", y.mean(axis=-1), 0.0, 1e-9)
    close("variances", y.var(axis=-1), 1.0, 1e-8)


@prop("layernorm", "LayerNorm ignores x -> 2 x + 0.75 (with eps -> 0)")
def layernorm_ignores_scale_and_shift(subject, example):
    x, options = example.args[0], {**example.options, "eps": 1e-12}
    if (x.std(axis=-1) < 0.1).any():
        return
    y = subject.output(example.args, options)
    close("the output of 2 x + 0.75", subject.output((2 * x + 0.75,) + example.args[1:], options), y, 1e-8)


@prop("layernorm", "the input gradient sums to 0 over the features and is orthogonal to x - mean "
                   "(with eps -> 0)", needs_backward=True)
def layernorm_gradient_is_blind_to_scale_and_shift(subject, example):
    x = example.args[0]
    # eps breaks the invariance to scale a little: the identity is exact as eps -> 0
    d_x = subject.gradients(example.args, {**example.options, "eps": 1e-12}, _upstream(x.shape))[0]
    close("the gradient's sum over the features", d_x.sum(axis=-1), 0.0)
    centred = x - x.mean(axis=-1, keepdims=True)
    close("the gradient's dot with x - mean", (d_x * centred).sum(axis=-1), 0.0, 1e-6)


@prop("rmsnorm", "with gamma = 1 each position gets root mean square 1 (with eps -> 0)")
def rmsnorm_gives_unit_rms(subject, example):
    x = example.args[0]
    y = subject.output((x, np.ones(x.shape[-1])), {**example.options, "eps": 1e-12})
    close("root mean squares", np.sqrt((y ** 2).mean(axis=-1)), 1.0, 1e-8)


@prop("rmsnorm", "RMSNorm ignores x -> 3 x (with eps -> 0)")
def rmsnorm_ignores_scale(subject, example):
    x, options = example.args[0], {**example.options, "eps": 1e-12}
    y = subject.output(example.args, options)
    close("the output of 3 x", subject.output((3 * x,) + example.args[1:], options), y, 1e-8)


@prop("rmsnorm", "the input gradient is orthogonal to x (with eps -> 0)", needs_backward=True)
def rmsnorm_gradient_is_blind_to_scale(subject, example):
    x = example.args[0]
    d_x = subject.gradients(example.args, {**example.options, "eps": 1e-12}, _upstream(x.shape))[0]
    close("the gradient's dot with x", (d_x * x).sum(axis=-1), 0.0, 1e-6)


@prop("swiglu", "position-wise: changing one position's input changes only that position's output")
def swiglu_is_position_wise(subject, example):
    x = example.args[0]
    out = subject.output(example.args, example.options)
    moved = x.copy()
    moved[..., 0, :] += 1.25
    after = subject.output((moved,) + example.args[1:], example.options)
    close("the other positions' outputs", after[..., 1:, :], out[..., 1:, :])
