"""Activations (``t06_activations.py``), as the engines know them.

ReLU, exact and tanh GELU and SiLU as components, their slopes as facts, the GELUs as each
other's convention, their gradient-check cases (tanh's too) and exercise 06. Mistakes:
``t06_activations.json``.
"""
from __future__ import annotations

import math

import numpy as np

from .draw import Example, arrays, normal, size
from .facts import close, upstream
from .case_inputs import shape
from .registry import Spec, pair

spec = Spec("t06_activations.py")
ACTIVATIONS = {"relu": "ReLU", "gelu": "GELU, exact (x Phi(x))", "gelu_tanh": "GELU, tanh approximation",
               "silu": "SiLU (x sigmoid(x))"}


def elementwise_inputs(draw):
    """x [B, N, d] for an activation."""
    shape_ = (draw(size(1, 2)), draw(size(1, 3)), draw(size(1, 4)))
    return Example(("x",), (draw(arrays(shape_)),))


for _name, _title in ACTIVATIONS.items():
    forward, backward = f"t06_activations.{_name}_forward", f"t06_activations.{_name}_backward"
    spec.component(_name, _title, f"{_name}_forward(x) -> (y, cache)", (forward, backward), "d_x",
                   (forward, backward))(elementwise_inputs)


@spec.corners("relu")
def relu_corners(rng):
    x = normal(rng, 2, 3, 4)
    x[0, 0, :2] = 0.0                              # exactly 0: the slope there is 0 by convention
    return [Example(("x",), (x,))]


@spec.prop("relu", "ReLU passes the gradient where x > 0 and stops it where x < 0", needs_backward=True)
def relu_gates_the_gradient(subject, example):
    x = example.args[0]
    G = upstream(x.shape)
    (d_x,) = subject.gradients(example.args, {}, G)
    close("the gradient", d_x, np.where(x > 0, G, 0.0))


def _slope(subject, x):
    (d_x,) = subject.gradients((np.asarray(x, np.float64),), {}, np.ones(np.shape(x)))
    return d_x


def activation_slopes(subject, example):
    close("slope at 0", _slope(subject, [0.0]), [0.5], 1e-12)
    close("slopes at 10 and -10", _slope(subject, [10.0, -10.0]), [1.0, 0.0], 1e-3)


for _name in ("gelu", "gelu_tanh", "silu"):
    spec.prop(_name, "the slope at x = 0 is exactly 1/2; about 1 at x = 10 and about 0 at x = -10",
              drawn=False, needs_backward=True)(activation_slopes)


@spec.prop("gelu", "GELU(1) = Phi(1) = 0.841345", drawn=False)
def gelu_at_one(subject, example):
    close("GELU(1)", subject.output((np.array([1.0]),), {}), [0.8413447460685429], 1e-12)


@spec.prop("silu", "SiLU(1) = sigmoid(1) = 0.731059", drawn=False)
def silu_at_one(subject, example):
    close("SiLU(1)", subject.output((np.array([1.0]),), {}), [1 / (1 + math.exp(-1))], 1e-12)


spec.convention("gelu", {"approximate": "tanh"}, lambda: pair("t06_activations.gelu_tanh_forward",
                                                               "t06_activations.gelu_tanh_backward"))
spec.convention("gelu_tanh", {"approximate": "none"}, lambda: pair("t06_activations.gelu_forward",
                                                                    "t06_activations.gelu_backward"))


def activation_case(name):
    """The gradient-check case of one activation: x [B, N, d] of two standard deviations."""
    def builder(rng, size):
        B, N, d, H = shape(size)
        return pair(f"t06_activations.{name}_forward", f"t06_activations.{name}_backward"), \
            (2 * normal(rng, B, N, d),), {}
    builder.__name__ = builder.__qualname__ = f"{name}_case"
    return builder


for _name in ("relu", "gelu", "gelu_tanh", "silu", "tanh"):
    spec.case(_name)(activation_case(_name))


spec.exercise(6, "activations", "ReLU, GELU, tanh-GELU and SiLU",
              "tutorial part 1, why attention needs an FFN after it; tutorial part 2 §10, what the MLP does",
              backward=("t06_activations.py:relu_backward", "t06_activations.py:gelu_backward",
                        "t06_activations.py:gelu_tanh_backward", "t06_activations.py:silu_backward"),
              forward=("t06_activations.py:relu_forward", "t06_activations.py:gelu_forward",
                       "t06_activations.py:gelu_tanh_forward", "t06_activations.py:silu_forward"),
              components=("relu", "gelu", "gelu_tanh", "silu"))
