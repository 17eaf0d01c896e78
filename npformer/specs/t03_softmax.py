"""Softmax (``t03_softmax.py``), as the engines know it.

``softmax`` as a component (any axis, a boolean mask that broadcasts), the facts the article
states of it, its conventions (what a fully masked row gives, an additive finite mask), its
gradient-check case and exercise 03. Mistakes: ``t03_softmax.json``.
"""
from __future__ import annotations

import math

import functools

import numpy as np

from ..t03_softmax import softmax_backward, softmax_forward
from .draw import Example, arrays, booleans, normal, sampled, shape_into, size, st
from .facts import PropertyFailed, close, readable, upstream, zero
from .case_inputs import shape
from .registry import Spec, pair

spec = Spec("t03_softmax.py")
ROWS = "fully_masked_row"                        # how a convention of fully masked rows is said
ADDITIVE_FILLS = ("-1e9", "-1e4", "-1e10", "finfo.min")   # what published code adds to masked scores
FAR = np.array([[1000.0, 999.0, 998.5], [-1000.0, -999.0, -1001.0]])      # rows far apart


@spec.component("softmax", "softmax over an axis, with a boolean mask",
                "softmax_forward(x, axis=-1, mask=None) -> (y, cache)",
                ("t03_softmax.softmax_forward", "t03_softmax.softmax_backward"), "d_x",
                ("t03_softmax.softmax_forward", "t03_softmax.softmax_backward"))
def softmax_inputs(draw):
    """x of 1 to 3 axes, an ``axis`` among them, and often a mask that broadcasts."""
    shape_ = tuple(draw(st().lists(size(1, 4), min_size=1, max_size=3)))
    x = draw(arrays(shape_))
    options = {"axis": draw(sampled([-1] + list(range(len(shape_)))))}
    if draw(st().booleans()):
        options["mask"] = draw(booleans(shape_into(draw, shape_)))
    return Example(("x",), (x,), options)


@spec.corners("softmax")
def softmax_corners(rng):
    x = normal(rng, 2, 3, 4)
    mask = rng.random((2, 3, 4)) < 0.6
    mask[0, 1] = False
    return [Example(("x",), (x,), {"axis": -1, "mask": mask}),
            Example(("x",), (x,), {"axis": 1, "mask": mask[:, :, :1]}),
            Example(("x",), (x,), {"axis": 0}), Example(("x",), (FAR,), {"axis": -1})]


# -- facts --------------------------------------------------------------------------------------
@spec.prop("softmax", "weights are non-negative and each row with a readable entry sums to 1")
def softmax_rows_sum_to_one(subject, example):
    x, axis, mask = example.args[0], example.options.get("axis", -1), example.options.get("mask")
    y = subject.output(example.args, example.options)
    if (np.asarray(y) < 0).any():
        raise PropertyFailed(f"a negative weight {np.min(y):.3g} at {tuple(np.argwhere(y < 0)[0])}")
    _, any_readable = readable(mask, x.shape, axis)
    close("row sums", np.sum(y, axis=axis, keepdims=True), np.where(any_readable, 1.0, 0.0))


@spec.prop("softmax", "a masked entry gets weight exactly 0; a row with nothing readable gives zeros, not NaN",
           needs_any=("mask",))
def softmax_masked_weights_are_zero(subject, example):
    x, mask = example.args[0], example.options.get("mask")
    if mask is None:
        return
    y = subject.output(example.args, example.options)
    allowed, _ = readable(mask, x.shape, example.options.get("axis", -1))
    zero("weights where masked", np.where(allowed, 0, np.nan_to_num(y, nan=1.0)))


@spec.prop("softmax", "adding the same number to every score of a row changes nothing")
def softmax_ignores_a_shift(subject, example):
    y = subject.output(example.args, example.options)
    shifted = subject.output((example.args[0] + 3.5,), example.options)
    close("weights after adding 3.5 to every score", shifted, y)


@spec.prop("softmax", "huge scores do not overflow: [1e300, 5e299, -1e300, 0] gives [1, 0, 0, 0]", drawn=False)
def softmax_does_not_overflow(subject, example):
    close("weights", subject.output((np.array([1e300, 5e299, -1e300, 0.0]),), {}), [1, 0, 0, 0])


@spec.prop("softmax", "the tutorial's scores [0.707, 0] give the weights [0.670, 0.330]", drawn=False)
def softmax_of_the_tutorials_scores(subject, example):
    close("weights", subject.output((np.array([1 / math.sqrt(2), 0.0]),), {}), [0.670, 0.330], 5e-4)


@spec.prop("softmax", "each row of the gradient sums to 0 (a shift of the scores changes nothing)",
           needs_backward=True)
def softmax_gradient_rows_sum_to_zero(subject, example):
    axis = example.options.get("axis", -1)
    (d_x,) = subject.gradients(example.args, example.options, upstream(example.args[0].shape))
    close("row sums of the gradient", np.sum(d_x, axis=axis), 0.0)


@spec.prop("softmax", "a masked score gets exactly zero gradient", needs_backward=True, needs_any=("mask",))
def softmax_masked_scores_get_no_gradient(subject, example):
    x, mask = example.args[0], example.options.get("mask")
    if mask is None:
        return
    (d_x,) = subject.gradients(example.args, example.options, upstream(x.shape))
    allowed, _ = readable(mask, x.shape, example.options.get("axis", -1))
    zero("the gradient where masked", np.where(allowed, 0, np.nan_to_num(d_x, nan=1.0)))


# -- conventions: what a fully masked row gives, an additive mask -------------------------------------
def rows_filled(fill):
    """Softmax giving a fully masked row uniform weights (a finite fill of the scores) or NaN."""
    forward, backward = pair("t03_softmax.softmax_forward", "t03_softmax.softmax_backward")

    def filled_forward(x, axis=-1, mask=None):
        y, cache = forward(x, axis=axis, mask=mask)
        if mask is None:
            return y, (cache, None)
        empty = ~np.broadcast_to(mask, x.shape).any(axis=axis, keepdims=True)
        empty = np.broadcast_to(empty, x.shape)
        y = np.where(empty, np.nan if fill == "nan" else 1.0 / x.shape[axis], y)
        return y, (cache, empty)

    def filled_backward(d_out, cache):
        inner, empty = cache
        d_x = backward(d_out, inner)
        if empty is not None:       # uniform weights do not move with the scores
            d_x = np.where(empty, np.nan if fill == "nan" else 0.0, d_x)
        return d_x
    return filled_forward, filled_backward


def additive(fill):
    """Softmax of the scores plus the mask as ``fill`` where an entry may not be read."""
    forward, backward = pair("t03_softmax.softmax_forward", "t03_softmax.softmax_backward")

    def additive_forward(x, axis=-1, mask=None):
        return forward(x if mask is None else x + np.where(mask, 0.0, fill), axis=axis)
    return additive_forward, backward


spec.convention("softmax", {ROWS: "uniform"}, functools.partial(rows_filled, "uniform"))
spec.convention("softmax", {ROWS: "nan"}, functools.partial(rows_filled, "nan"))
for _fill in ADDITIVE_FILLS:
    spec.convention("softmax", {"mask": f"additive {_fill}"},
                    functools.partial(additive, float(np.finfo(np.float64).min if _fill == "finfo.min" else _fill)))
spec.capability("softmax", "no_fully_masked")(
    lambda args, options: options.get("mask") is None or bool(
        np.broadcast_to(options["mask"], np.shape(args[0])).any(axis=options.get("axis", -1)).all()))


# -- the gradient-check case and the exercise ------------------------------------------------------------
@spec.case("softmax")
def softmax_case(rng, size):
    B, N, d, H = shape(size)
    mask = rng.random((B, N, d)) < 0.7
    mask[0, 0] = False                      # a fully masked row: zero weights, zero gradient
    return (softmax_forward, softmax_backward), (normal(rng, B, N, d),), {"mask": mask}


spec.exercise(3, "softmax", "softmax", "tutorial part 1, attention by hand; tutorial part 2 §6, how attention is computed",
              backward=("t03_softmax.py:softmax_backward",), forward=("t03_softmax.py:softmax_forward",),
              components=("softmax",))
