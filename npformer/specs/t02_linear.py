"""The linear layer (``t02_linear.py``), as the engines know it.

``linear`` as a component (a weight [d_in, d_out], a bias or none), its facts, its gradient-check
cases, exercise 02 and its claim. Mistakes: ``t02_linear.json``.
"""
from __future__ import annotations

import numpy as np

from ..t02_linear import Linear, linear_backward, linear_forward
from . import claims
from .draw import Example, arrays, leading_axes, normal, size, st
from .facts import close, upstream
from .case_inputs import shape
from .registry import Spec

spec = Spec("t02_linear.py")


@spec.component("linear", "the linear layer y = x W + b", "linear_forward(x, weight, bias=None) -> (y, cache)",
                ("t02_linear.linear_forward", "t02_linear.linear_backward"), "(d_x, d_weight, d_bias or None)",
                ("t02_linear.linear_forward", "t02_linear.linear_backward"))
def linear_inputs(draw):
    """x [..., d_in] (one to three leading axes), weight [d_in, d_out], and a bias [d_out] or none."""
    lead, d_in, d_out = leading_axes(draw), draw(size(1, 4)), draw(size(1, 4))
    args = (draw(arrays(lead + (d_in,))), draw(arrays((d_in, d_out))))
    names = ("x", "weight")
    if draw(st().booleans()):
        args, names = args + (draw(arrays((d_out,))),), names + ("bias",)
    return Example(names, args)


@spec.corners("linear")
def linear_corners(rng):
    x, w, b = normal(rng, 2, 3, 4), normal(rng, 4, 5), normal(rng, 5)
    return [Example(("x", "weight", "bias"), (x, w, b)), Example(("x", "weight"), (x, w)),
            Example(("x", "weight", "bias"), (normal(rng, 5, 4), w, b)),
            Example(("x", "weight", "bias"), (normal(rng, 2, 2, 3, 4), w, b))]


@spec.prop("linear", "d_bias is d_out summed over every position", needs_backward=True)
def linear_bias_gradient_is_a_sum(subject, example):
    if len(example.args) < 3:
        return
    out = subject.output(example.args, {})
    G = upstream(np.shape(out))
    grads = subject.gradients(example.args, {}, G)
    close("d_bias", grads[2], G.reshape(-1, G.shape[-1]).sum(axis=0))


@spec.prop("linear", "a batch's weight gradient is the sum of its sequences' (each position adds x^T d_y)",
           needs_backward=True)
def linear_weight_gradient_adds_over_the_batch(subject, example):
    x = example.args[0]
    G = upstream(x.shape[:-1] + (example.args[1].shape[1],))
    whole = subject.gradients(example.args, {}, G)[1]
    parts = [subject.gradients((x[b:b + 1],) + example.args[1:], {}, G[b:b + 1])[1] for b in range(len(x))]
    close("d_weight of the batch against the sum of each sequence's", whole, sum(parts))


@spec.case("linear")
def linear_case(rng, size):
    B, N, d, H = shape(size)
    bias = (normal(rng, d + 3),) if size != 1 else ()          # with and without a bias
    return (linear_forward, linear_backward), (normal(rng, B, N, d), normal(rng, d, d + 3)) + bias, {}


@spec.case("Linear")
def linear_module_case(rng, size):
    B, N, d, H = shape(size)
    return Linear(d, d + 3, True, rng), (normal(rng, B, N, d),), {}


spec.exercise(2, "linear", "the linear layer",
              "tutorial part 1, Q, K and V from one input; tutorial part 2 §5, query, key and value",
              backward=("t02_linear.py:linear_backward", "t02_linear.py:Linear.backward"),
              forward=("t02_linear.py:linear_forward",),
              checks=(("Linear", (0, 1)),), components=("linear",))


def bias_gradient(L):
    """{"bias_gradient": what linear_backward returned for the bias of a layer without one}:
    the half of the claim that runs the learner's code."""
    g = claims.rng()
    _, cache = L.t02_linear.linear_forward(g.standard_normal((2, 4)), g.standard_normal((4, 3)))
    found = L.t02_linear.linear_backward(g.standard_normal((2, 3)), cache)[2]
    return {"bias_gradient": None if found is None else np.asarray(found)}


def judge_bias_gradient(computed):
    """The claim's verdict on ``bias_gradient``'s facts: the gradient must be None."""
    if "bias_gradient" not in computed:
        raise claims.ClaimFailed("the claim's run did not report the bias gradient")
    if computed["bias_gradient"] is not None:
        raise claims.ClaimFailed("linear_backward returned a bias gradient for a layer without a bias")


@spec.claim("linear", "without a bias, the bias gradient is None")
def no_bias_gradient(L, R):
    return judge_bias_gradient(bias_gradient(L))


# graded, the two halves run apart: the learner's process reports, the judge decides
no_bias_gradient.compute, no_bias_gradient.judge = bias_gradient, judge_bias_gradient
