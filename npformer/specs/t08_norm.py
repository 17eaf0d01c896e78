"""LayerNorm and RMSNorm (``t08_norm.py``), as the engines know them.

Both norms as components, the facts the article states (standardised rows, blind to scale and
shift), LayerNorm's conventions in published code (unbiased variance, eps after the root),
their gradient-check cases and exercise 08. Mistakes: ``t08_norm.json``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..t08_norm import (LayerNorm, RMSNorm, layernorm_backward, layernorm_forward, rmsnorm_backward,
                        rmsnorm_forward, sum_over_positions)
from .draw import Example, arrays, leading_axes, normal, size
from .facts import close, upstream
from .case_inputs import shape
from .registry import Spec, original_pair, pair

spec = Spec("t08_norm.py")


def norm_inputs(draw, centred):
    """x [..., d] (one to three leading axes), gamma [d] (and beta [d] for LayerNorm)."""
    lead, d = leading_axes(draw), draw(size(1, 5))
    args = (draw(arrays(lead + (d,))), draw(arrays((d,))))
    names = ("x", "gamma")
    if centred:
        args, names = args + (draw(arrays((d,))),), names + ("beta",)
    return Example(names, args)


@spec.component("layernorm", "LayerNorm", "layernorm_forward(x, gamma, beta, eps=1e-5) -> (y, cache)",
                ("t08_norm.layernorm_forward", "t08_norm.layernorm_backward"), "(d_x, d_gamma, d_beta)",
                ("t08_norm.layernorm_forward", "t08_norm.layernorm_backward"))
def layernorm_inputs(draw):
    """``norm_inputs`` with a beta."""
    return norm_inputs(draw, centred=True)


@spec.component("rmsnorm", "RMSNorm", "rmsnorm_forward(x, gamma, eps=1e-6) -> (y, cache)",
                ("t08_norm.rmsnorm_forward", "t08_norm.rmsnorm_backward"), "(d_x, d_gamma)",
                ("t08_norm.rmsnorm_forward", "t08_norm.rmsnorm_backward"))
def rmsnorm_inputs(draw):
    """``norm_inputs`` without a beta."""
    return norm_inputs(draw, centred=False)


def norm_corners(rng, centred):
    names = ("x", "gamma", "beta") if centred else ("x", "gamma")
    params = (1 + 0.5 * normal(rng, 5),) + ((normal(rng, 5),) if centred else ())
    return [Example(names, (normal(rng, 2, 3, 5),) + params), Example(names, (normal(rng, 4, 5),) + params)]


spec.corners("layernorm")(lambda rng: norm_corners(rng, True))
spec.corners("rmsnorm")(lambda rng: norm_corners(rng, False))


# -- facts --------------------------------------------------------------------------------------
@spec.prop("layernorm", "with gamma = 1 and beta = 0 each position gets mean 0 and variance 1 (with eps -> 0)")
def layernorm_standardises(subject, example):
    x = example.args[0]
    d = x.shape[-1]
    if d < 2 or (x.std(axis=-1) < 0.1).any():
        return                      # a constant row has no variance to bring to 1
    y = subject.output((x, np.ones(d), np.zeros(d)), {**example.options, "eps": 1e-12})
    close("means", y.mean(axis=-1), 0.0, 1e-9)
    close("variances", y.var(axis=-1), 1.0, 1e-8)


@spec.prop("layernorm", "LayerNorm ignores x -> 2 x + 0.75 (with eps -> 0)")
def layernorm_ignores_scale_and_shift(subject, example):
    x, options = example.args[0], {**example.options, "eps": 1e-12}
    if (x.std(axis=-1) < 0.1).any():
        return
    y = subject.output(example.args, options)
    close("the output of 2 x + 0.75", subject.output((2 * x + 0.75,) + example.args[1:], options), y, 1e-8)


@spec.prop("layernorm", "the input gradient sums to 0 over the features and is orthogonal to x - mean "
                        "(with eps -> 0)", needs_backward=True)
def layernorm_gradient_is_blind_to_scale_and_shift(subject, example):
    x = example.args[0]
    # eps breaks the invariance to scale a little: the identity is exact as eps -> 0
    d_x = subject.gradients(example.args, {**example.options, "eps": 1e-12}, upstream(x.shape))[0]
    close("the gradient's sum over the features", d_x.sum(axis=-1), 0.0)
    centred = x - x.mean(axis=-1, keepdims=True)
    close("the gradient's dot with x - mean", (d_x * centred).sum(axis=-1), 0.0, 1e-6)


@spec.prop("rmsnorm", "with gamma = 1 each position gets root mean square 1 (with eps -> 0)")
def rmsnorm_gives_unit_rms(subject, example):
    x = example.args[0]
    y = subject.output((x, np.ones(x.shape[-1])), {**example.options, "eps": 1e-12})
    close("root mean squares", np.sqrt((y ** 2).mean(axis=-1)), 1.0, 1e-8)


@spec.prop("rmsnorm", "RMSNorm ignores x -> 3 x (with eps -> 0)")
def rmsnorm_ignores_scale(subject, example):
    x, options = example.args[0], {**example.options, "eps": 1e-12}
    y = subject.output(example.args, options)
    close("the output of 3 x", subject.output((3 * x,) + example.args[1:], options), y, 1e-8)


@spec.prop("rmsnorm", "the input gradient is orthogonal to x (with eps -> 0)", needs_backward=True)
def rmsnorm_gradient_is_blind_to_scale(subject, example):
    x = example.args[0]
    d_x = subject.gradients(example.args, {**example.options, "eps": 1e-12}, upstream(x.shape))[0]
    close("the gradient's dot with x", (d_x * x).sum(axis=-1), 0.0, 1e-6)


# -- conventions of published code: the variance's divisor, eps after the root, a gain stored as w - 1 ------
def layernorm_convention(said, base=pair):
    """LayerNorm under ``said``: ``variance`` "unbiased" (PyTorch's ``var(unbiased=True)``: the
    squares' sum over d - 1), ``eps`` "outside sqrt" ((x - mean) / (std + eps), as the Annotated
    Transformer), ``gain`` "1 + w" (the stored weight w applied as 1 + w: Megatron's
    layernorm_1p), in any combination. Without eps after the root it is npformer's own function
    with another gain and eps (so its catalogued mistakes apply under it)."""
    unbiased, one_plus = said.get("variance") == "unbiased", said.get("gain") == "1 + w"
    if said.get("eps") == "outside sqrt":
        return eps_outside_layernorm(unbiased, one_plus)
    forward, backward = base("t08_norm.layernorm_forward", "t08_norm.layernorm_backward")

    def factor(d):
        return (np.sqrt((d - 1) / d) if d > 1 else np.nan) if unbiased else 1.0

    def convention_forward(x, gamma, beta, eps=1e-5):
        # xc / sqrt(sum xc^2 / (d-1) + eps) = c xc / sqrt(var + eps c^2), c = sqrt((d-1)/d)
        c = factor(x.shape[-1])
        gain = 1 + gamma if one_plus else gamma
        return forward(x, gain * c, beta, eps * c * c)          # npformer's own cache: c is d's

    def convention_backward(d_out, cache):
        d_x, d_gain, d_beta = backward(d_out, cache)
        return d_x, d_gain * factor(cache.xhat.shape[-1]), d_beta      # d(1 + w)/dw = 1
    return convention_forward, convention_backward


class OutsideCache(NamedTuple):
    """What a norm with eps after the root keeps for its backward (``xhat``, as npformer's)."""

    xhat: np.ndarray
    root: np.ndarray        # the standard deviation, or the root mean square [..., 1]
    eps: float
    gain: np.ndarray
    n: int                  # what the squares' sum is divided by


def eps_outside_layernorm(unbiased=False, one_plus=False):
    """LayerNorm adding eps after the root: (x - mean) / (std + eps), std biased or not."""
    def outside_forward(x, gamma, beta, eps=1e-5):
        d = x.shape[-1]
        n = d - 1 if unbiased else d
        xc = x - x.mean(axis=-1, keepdims=True)                        # [..., d]
        with np.errstate(invalid="ignore", divide="ignore"):
            std = np.sqrt((xc ** 2).sum(axis=-1, keepdims=True) / n)   # [..., 1]
        xhat = xc / (std + eps)
        gain = 1 + gamma if one_plus else gamma
        return gain * xhat + beta, OutsideCache(xhat, std, eps, gain, n)

    def outside_backward(d_out, cache):
        xhat, std, eps, gain, n = cache
        d_xhat = d_out * gain
        # xhat = xc / (std + eps): the direct path, then the one through std = sqrt(sum xc^2 / n)
        # (d std / d xc = xc / (n std), and xc = xhat (std + eps)); the mean's path removes
        # each row's mean of the sum (that of the second term is 0: xhat sums to 0)
        through_std = xhat * (d_xhat * xhat).sum(axis=-1, keepdims=True) / n / np.where(std > 0, std, np.inf)
        d_x = (d_xhat - d_xhat.mean(axis=-1, keepdims=True)) / (std + eps) - through_std
        return d_x, sum_over_positions(d_out * xhat), sum_over_positions(d_out)
    return outside_forward, outside_backward


def rmsnorm_convention(said, base=pair):
    """RMSNorm under ``said``: ``eps`` "outside sqrt" (x / (rms + eps), as the RMSNorm paper's
    code), ``gain`` "1 + w" (Gemma's x / rms * (1 + w)), or both."""
    one_plus = said.get("gain") == "1 + w"
    if said.get("eps") == "outside sqrt":
        return eps_outside_rmsnorm(one_plus)
    forward, backward = base("t08_norm.rmsnorm_forward", "t08_norm.rmsnorm_backward")

    def convention_forward(x, gamma, eps=1e-6):
        return forward(x, 1 + gamma, eps)

    return convention_forward, backward           # d(1 + w)/dw = 1


def eps_outside_rmsnorm(one_plus=False):
    """RMSNorm adding eps after the root: x / (rms + eps)."""
    def outside_forward(x, gamma, eps=1e-6):
        rms = np.sqrt((x ** 2).mean(axis=-1, keepdims=True))            # [..., 1]
        xhat = x / (rms + eps)
        gain = 1 + gamma if one_plus else gamma
        return gain * xhat, OutsideCache(xhat, rms, eps, gain, x.shape[-1])

    def outside_backward(d_out, cache):
        xhat, rms, eps, gain, _ = cache
        d_xhat = d_out * gain
        # xhat = x / (rms + eps): the direct path, and the one through rms (d rms / dx = x / (d rms),
        # x = xhat (rms + eps))
        through_rms = xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True) / np.where(rms > 0, rms, np.inf)
        return d_xhat / (rms + eps) - through_rms, sum_over_positions(d_out * xhat)
    return outside_forward, outside_backward


def mean_factor(example):
    """The 1/d of a mean over the features."""
    d = example.args[0].shape[-1]
    return {f"1/d (the mean over the {d} features)": 1 / d}


spec.factors("layernorm")(mean_factor)
spec.factors("rmsnorm")(mean_factor)
spec.conventions("layernorm", {"variance": ("unbiased",), "eps": ("outside sqrt",), "gain": ("1 + w",)},
                 layernorm_convention)
spec.conventions("rmsnorm", {"eps": ("outside sqrt",), "gain": ("1 + w",)}, rmsnorm_convention)


def norms_in_modules(chosen):
    """The patches that make every norm of a block or model follow ``chosen``'s variance and eps
    (a gain stored as w is the weight map's business: ``gains_one_plus``)."""
    said = {k: v for k, v in chosen.items() if k in ("variance", "eps")}
    found = {}
    for name, build in (("layernorm", layernorm_convention), ("rmsnorm", rmsnorm_convention)):
        own = {k: v for k, v in said.items() if k != "variance" or name == "layernorm"}
        if own:
            forward, backward = build(own, original_pair)
            found[f"npformer.t08_norm.{name}_forward"] = forward
            found[f"npformer.t08_norm.{name}_backward"] = backward
    return found


def _has_norms(kind, config):
    return not kind.endswith("_mlp")


spec.module_convention({"variance": "unbiased"}, lambda kind, config: _has_norms(kind, config) and
                       config.norm == "layernorm", norms_in_modules)
spec.module_convention({"eps": "outside sqrt"}, _has_norms, norms_in_modules)
spec.module_convention({"gain": "1 + w"}, _has_norms, gains_one_plus=True)


# -- gradient-check cases ---------------------------------------------------------------------------
@spec.case("layernorm")
def layernorm_case(rng, size):
    B, N, d, H = shape(size)
    return ((layernorm_forward, layernorm_backward),
            (normal(rng, B, N, d), 1 + 0.5 * normal(rng, d), normal(rng, d)), {"eps": 1e-5})


@spec.case("rmsnorm")
def rmsnorm_case(rng, size):
    B, N, d, H = shape(size)
    return (rmsnorm_forward, rmsnorm_backward), (normal(rng, B, N, d), 1 + 0.5 * normal(rng, d)), {"eps": 1e-6}


@spec.case("LayerNorm")
def layernorm_module_case(rng, size):
    B, N, d, H = shape(size)
    return LayerNorm(d), (normal(rng, B, N, d),), {}


@spec.case("RMSNorm")
def rmsnorm_module_case(rng, size):
    B, N, d, H = shape(size)
    return RMSNorm(d), (normal(rng, B, N, d),), {}


spec.exercise(8, "norm", "LayerNorm and RMSNorm",
              "tutorial part 1, FFN, residuals and normalisation; tutorial part 2 §12, LayerNorm and RMSNorm",
              backward=("t08_norm.py:layernorm_backward", "t08_norm.py:rmsnorm_backward",
                        "t08_norm.py:LayerNorm.backward", "t08_norm.py:RMSNorm.backward"),
              forward=("t08_norm.py:layernorm_forward", "t08_norm.py:rmsnorm_forward"),
              checks=(("LayerNorm", (0, 1)), ("RMSNorm", (0, 1))), components=("layernorm", "rmsnorm"))
