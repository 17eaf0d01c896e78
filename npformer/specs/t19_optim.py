"""The optimiser (``t19_optim.py``), as the engines know it.

One AdamW update as a component, the facts of Adam's first steps and of decoupled decay, an
update without bias correction as a convention, and exercise 19 (the update). Mistakes:
``t19_optim.json``.
"""
from __future__ import annotations

import numpy as np

from .draw import Example, arrays, normal, sampled, size, st
from .facts import close
from .registry import Spec

spec = Spec("t19_optim.py")


@spec.component("adamw", "one AdamW update of one parameter",
                "adamw_update(data, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0) "
                "-> (data, m, v)", ("t19_optim.adamw_update", None), "", ("t19_optim.adamw_update",))
def adamw_inputs(draw):
    """One parameter's data, grad, moments m and v (v >= 0), the step (1, 2, ...) and the
    settings lr, betas, eps, weight_decay."""
    shape = (draw(size(1, 3)), draw(size(1, 3)))
    data, grad, m = draw(arrays(shape)), draw(arrays(shape)), draw(arrays(shape))
    v = np.abs(draw(arrays(shape)))
    step = draw(st().integers(1, 5))
    options = {"lr": draw(sampled([0.1, 1e-3])), "betas": draw(sampled([(0.9, 0.999), (0.8, 0.95)])),
               "eps": 1e-8, "weight_decay": draw(sampled([0.0, 0.1]))}
    return Example(("data", "grad", "m", "v", "step"), (data, grad, m, v, step), options)


@spec.corners("adamw")
def adamw_corners(rng):
    data, grad, m = normal(rng, 3, 2), normal(rng, 3, 2), normal(rng, 3, 2)
    v = np.abs(normal(rng, 3, 2))
    names, settings = ("data", "grad", "m", "v", "step"), {"lr": 0.1, "betas": (0.9, 0.999), "eps": 1e-8}
    first = (data, 1e-3 * grad, np.zeros_like(m), np.zeros_like(v), 1)        # the first step: v = 0
    return [Example(names, (data, grad, m, v, 3), {**settings, "weight_decay": 0.1}),
            Example(names, first, {**settings, "weight_decay": 0.0})]


def _adamw(subject, data, grad, step=1, lr=0.1, weight_decay=0.0, m=None, v=None):
    m = np.zeros_like(data) if m is None else m
    v = np.zeros_like(data) if v is None else v
    return subject.output((data, grad, m, v, step),
                          {"lr": lr, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": weight_decay})


@spec.prop("adamw", "the first step moves each weight by lr g / (|g| + eps): about lr, against g", drawn=False)
def adamw_first_step_is_about_lr(subject, example):
    g = np.array([0.5, -2.0, 1e-3])
    data, m, v = _adamw(subject, np.ones(3), g)
    close("weights after one step", data, 1 - 0.1 * g / (np.abs(g) + 1e-8), 1e-12)
    close("m after one step", m, 0.1 * g, 1e-12)
    close("v after one step", v, 0.001 * g * g, 1e-12)


@spec.prop("adamw", "decoupled weight decay: with a zero gradient a step multiplies the weights by "
                    "1 - lr * wd", drawn=False)
def adamw_decay_is_decoupled(subject, example):
    data, _, _ = _adamw(subject, np.array([2.0, -4.0]), np.zeros(2), weight_decay=0.5)
    close("weights", data, np.array([2.0, -4.0]) * (1 - 0.1 * 0.5), 1e-12)


@spec.prop("adamw", "bias correction: at step 2 with m = 0.1 g and v = 0.001 g^2 the step is "
                    "lr g / (|g| + eps) again", drawn=False)
def adamw_corrects_the_bias_at_step_two(subject, example):
    g = np.array([0.5, -2.0])
    # the moments one step of g left behind, then g again: m_hat = g, v_hat = g^2
    data, _, _ = _adamw(subject, np.ones(2), g, step=2, m=0.1 * g, v=0.001 * g * g)
    close("weights after the second step", data, 1 - 0.1 * g / (np.abs(g) + 1e-8), 1e-9)


def adamw_uncorrected():
    """AdamW without bias correction: lr m / (sqrt(v) + eps) from the first step."""
    from ..t19_optim import adamw_update

    def uncorrected(data, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        # lr m / (sqrt(v) + eps) is the corrected update with lr, eps and the decay rescaled
        b1, b2 = betas
        c1, c2 = 1 - b1 ** step, 1 - b2 ** step
        rate = lr * c1 / np.sqrt(c2)
        return adamw_update(data, grad, m, v, step, rate, betas, eps / np.sqrt(c2),
                            weight_decay * lr / rate)
    return uncorrected, None


spec.convention("adamw", {"bias_correction": False}, adamw_uncorrected)

spec.exercise(19, "optim", "the AdamW update",
              "beyond the tutorial: training (worked example 17, first training steps)",
              backward=("t19_optim.py:adamw_update",), components=("adamw",))
