"""Log-softmax and cross-entropy (``t11_loss.py``), as the engines know them.

Both as components (ignored targets drawn), their facts (a row's probabilities sum to 1, ln 50
for uniform logits over 50 words, a mean over the counted targets), a summed loss as a
convention, their gradient-check cases and exercise 11. Mistakes: ``t11_loss.json``.
"""
from __future__ import annotations

import math

import numpy as np

from ..t11_loss import IGNORE_INDEX, cross_entropy_backward, cross_entropy_forward, log_softmax_backward, \
    log_softmax_forward
from .draw import Example, arrays, normal, sampled, size, st, targets
from .facts import close, upstream, zero
from .case_inputs import shape
from .registry import Spec, pair

spec = Spec("t11_loss.py")


@spec.component("log_softmax", "log-softmax over an axis", "log_softmax_forward(x, axis=-1) -> (y, cache)",
                ("t11_loss.log_softmax_forward", "t11_loss.log_softmax_backward"), "d_x",
                ("t11_loss.log_softmax_forward", "t11_loss.log_softmax_backward"))
def log_softmax_inputs(draw):
    """x of 1 to 3 axes and an ``axis`` among them."""
    shape_ = tuple(draw(st().lists(size(1, 4), min_size=1, max_size=3)))
    return Example(("x",), (draw(arrays(shape_)),), {"axis": draw(sampled([-1] + list(range(len(shape_)))))})


@spec.component("cross_entropy", "cross-entropy over the counted targets (IGNORE_INDEX = -100 skipped)",
                "cross_entropy_forward(logits, targets, ignore_index=-100) -> (loss, cache)",
                ("t11_loss.cross_entropy_forward", "t11_loss.cross_entropy_backward"), "(d_logits, None)",
                ("t11_loss.cross_entropy_forward", "t11_loss.cross_entropy_backward", "t11_loss.log_softmax_forward"))
def cross_entropy_inputs(draw):
    """logits [B, N, V] and targets [B, N] (some of them IGNORE_INDEX)."""
    B, N, V = draw(size(1, 2)), draw(size(1, 3)), draw(size(2, 5))
    return Example(("logits", "targets"), (draw(arrays((B, N, V))), targets(draw, (B, N), V)))


@spec.corners("log_softmax")
def log_softmax_corners(rng):
    far = np.array([[1000.0, 999.0, 998.5], [-1000.0, -999.0, -1001.0]])
    return [Example(("x",), (normal(rng, 2, 3, 4),), {"axis": 1}), Example(("x",), (far,), {"axis": -1})]


@spec.corners("cross_entropy")
def cross_entropy_corners(rng):
    targets_ = rng.integers(0, 5, (2, 3))
    targets_[0, 1] = IGNORE_INDEX
    huge = 800.0 * normal(rng, 2, 3, 5)                     # logits far beyond exp's range
    return [Example(("logits", "targets"), (normal(rng, 2, 3, 5), targets_)),
            Example(("logits", "targets"), (huge, targets_))]


# -- facts --------------------------------------------------------------------------------------
@spec.prop("log_softmax", "the probabilities e^y of a row sum to 1")
def log_softmax_probabilities_sum_to_one(subject, example):
    y = subject.output(example.args, example.options)
    close("sum of e^y", np.exp(y).sum(axis=example.options.get("axis", -1)), 1.0)


@spec.prop("log_softmax", "the input gradient sums to 0 over each row", needs_backward=True)
def log_softmax_gradient_rows_sum_to_zero(subject, example):
    (d_x,) = subject.gradients(example.args, example.options, upstream(example.args[0].shape))
    close("row sums of the gradient", d_x.sum(axis=example.options.get("axis", -1)), 0.0)


@spec.prop("cross_entropy", "uniform logits over V = 50 give the loss ln 50 = 3.912 (where an untrained "
                            "50-word model starts)", drawn=False)
def cross_entropy_of_uniform_logits(subject, example):
    loss = subject.output((np.zeros((1, 3, 50)), np.array([[4, 0, 49]])), {})
    close("loss", loss, math.log(50), 1e-12)


@spec.prop("cross_entropy", "ignored targets get exactly zero gradient; each counted row of d_logits sums to 0",
           needs_backward=True)
def cross_entropy_ignored_targets_get_no_gradient(subject, example):
    logits, targets_ = example.args
    d_logits = subject.gradients(example.args, {}, np.array(1.0))[0]
    ignored = targets_ == -100
    zero("d_logits of ignored targets", d_logits[ignored])
    close("row sums of d_logits", d_logits.sum(axis=-1), 0.0)


@spec.prop("cross_entropy", "the loss is a mean: with every position twice, each row's gradient halves",
           needs_backward=True)
def cross_entropy_is_a_mean(subject, example):
    logits, targets_ = example.args
    once = subject.gradients(example.args, {}, np.array(1.0))[0]
    twice = subject.gradients((np.concatenate([logits, logits]), np.concatenate([targets_, targets_])),
                              {}, np.array(1.0))[0]
    close("d_logits with every position twice", twice[:len(logits)], once / 2)


def summed_loss():
    """Cross-entropy summed over the counted targets instead of averaged."""
    forward, backward = pair("t11_loss.cross_entropy_forward", "t11_loss.cross_entropy_backward")

    def summed_forward(logits, targets, ignore_index=-100):
        loss, cache = forward(logits, targets, ignore_index=ignore_index)
        return loss * cache.count, cache

    def summed_backward(d_loss, cache):
        # the mean's backward divides by max(count, 1): undo that very divisor (with no counted
        # target the gradient is 0 either way)
        d_logits, none = backward(d_loss * max(cache.count, 1), cache)
        return d_logits, none
    return summed_forward, summed_backward


spec.convention("cross_entropy", {"reduction": "sum"}, summed_loss)


@spec.factors("cross_entropy")
def loss_factors(example):
    """The mean's 1/count, over the targets that count."""
    targets = example.args[example.names.index("targets")]
    count = int((targets != example.options.get("ignore_index", -100)).sum())
    return {"1/count (the mean over counted targets)": 1 / max(count, 1)}
spec.capability("cross_entropy", "no_ignore_index")(
    lambda args, options: not (np.asarray(args[1]) == options.get("ignore_index", -100)).any())


@spec.fit("cross_entropy", "no_ignore_index")
def targets_counted(example):
    """A corner with its ignored targets counted as 0 (its huge logits still test the range)."""
    logits, targets_ = example.args[:2]
    return Example(example.names, (logits, np.where(targets_ == -100, 0, targets_)) + tuple(example.args[2:]),
                   example.options)


@spec.case("log_softmax")
def log_softmax_case(rng, size):
    B, N, d, H = shape(size)
    return (log_softmax_forward, log_softmax_backward), (2 * normal(rng, B, N, d),), {}


@spec.case("cross_entropy")
def cross_entropy_case(rng, size):
    B, N, d, H = shape(size)
    targets_ = rng.integers(0, d, (B, N))
    targets_[0, 0] = IGNORE_INDEX            # an ignored (padded) target
    if size == 0:
        targets_[:] = IGNORE_INDEX           # exactly one target counts: the mean divides by 1
        targets_[0, 1] = 2
    return (cross_entropy_forward, cross_entropy_backward), (normal(rng, B, N, d), targets_), {}


spec.exercise(11, "loss", "log-softmax and cross-entropy",
              "beyond the tutorial: the loss (its logits and softmax sections lead up to it; worked example 17)",
              backward=("t11_loss.py:log_softmax_backward", "t11_loss.py:cross_entropy_backward"),
              forward=("t11_loss.py:log_softmax_forward", "t11_loss.py:cross_entropy_forward"),
              checks=(("cross_entropy", (0,)),), components=("log_softmax", "cross_entropy"))
