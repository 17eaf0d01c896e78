"""A learner's backward beside the reference one: which tensor differs, where, and why.

Both sides get the same float64 problem (a gradient-check case built from the same seed,
parameters nudged as ``gradcheck`` nudges them) and the same upstream gradient G. Each
gradient is compared element by element with the reference gradient; a differing one
is then examined for the usual mistakes:

- shape: the transpose of the right shape, or a sum over the wrong axes;
- values: exactly -1 times the right one (a sign flip), a constant factor (a missing
  1/sqrt(D) or 1/n of a mean), wrong only where the gradient must be exactly 0 (a mask
  left out of the backward), the transpose of the right one;
- a leak: when G changes at one position only, the learner's gradient changes at
  positions that position cannot reach (a sum or mean over the wrong axis);
- accumulation: two backward passes must leave twice one gradient in ``.grad``.
"""
from __future__ import annotations

import inspect
import math

import numpy as np

MATCH_TOL = 1e-7                 # learner vs reference, relative to the tensor's largest entry
SEED = 20260611                  # the seed gradcheck uses, so the numbers agree with its report


def is_module(target):
    """True for a Module (of the learner's package or the library's), False for a function pair."""
    return hasattr(target, "named_parameters") and hasattr(target, "backward")


def _pair(target):
    return (target.forward, target.backward) if is_module(target) else target


def input_names(target, count):
    """The names of forward's first ``count`` parameters ("x", "weight" ...), from its signature."""
    forward = _pair(target)[0]
    try:
        names = [p.name for p in inspect.signature(forward).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return [names[i] if i < len(names) else f"input[{i}]" for i in range(count)]


def _is_float(x):
    return isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.floating)


class Problem:
    """One float64 problem: target, inputs, options and upstream gradient G, as gradcheck sets them up."""

    def __init__(self, target, inputs, options):
        rng = np.random.default_rng(SEED)
        options = dict(options)
        randomize = options.pop("randomize", True)
        self.upstream = options.pop("upstream", None)
        if is_module(target):
            target = target.astype(np.float64)
            if randomize:
                for p in target.parameters():
                    p.data += 0.3 * rng.standard_normal(p.shape)
        self.target, self.options, self.rng = target, options, rng
        self.inputs = [np.asarray(x, np.float64) if np.issubdtype(np.asarray(x).dtype, np.floating) else x
                       for x in inputs]
        self.names = input_names(target, len(self.inputs))

    def forward(self):
        """The forward's (output, cache)."""
        return _pair(self.target)[0](*self.inputs, **self.options)

    def upstream_for(self, out):
        """G: the case's own upstream gradient, or a random one shaped like ``out``."""
        return self.upstream if self.upstream is not None else self.rng.standard_normal(np.shape(out))

    def gradients(self, G, repeat=1):
        """{tensor name: gradient} after ``repeat`` backward passes of G (from zeroed .grad)."""
        out, cache = self.forward()
        if is_module(self.target):
            self.target.zero_grad()
        for _ in range(repeat):                      # a fresh G each time: backward may not keep it intact
            returned = _pair(self.target)[1](np.array(G, dtype=np.float64), cache)
        returned = returned if isinstance(returned, tuple) else (returned,)
        grads = {}
        for i, (name, x) in enumerate(zip(self.names, self.inputs)):
            if _is_float(x):
                grads[name] = returned[i] if i < len(returned) else None
        if is_module(self.target):
            grads.update({name: p.grad.copy() for name, p in self.target.named_parameters()})
        return grads


def relative_error(mine, expected):
    """max |mine - expected| / max(|mine|, |expected|) over the tensor, and the worst index."""
    diff = np.abs(mine - expected)
    scale = max(np.abs(mine).max(initial=0), np.abs(expected).max(initial=0), 1e-12)
    worst = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
    return float(diff.max(initial=0) / scale), tuple(int(i) for i in worst)


def compare_tensor(name, mine, expected, factors):
    """None when ``mine`` matches; else a dict naming the tensor, its worst element and diagnoses."""
    if mine is None:
        return {"name": name, "diagnoses": [f"your backward returned no gradient for {name}: return "
                                            f"one gradient per float input of forward, in order"]}
    mine = np.asarray(mine, dtype=np.float64) if np.size(mine) else np.asarray(mine)
    if mine.shape != expected.shape:
        return {"name": name, "shape": list(mine.shape), "expected_shape": list(expected.shape),
                "diagnoses": [shape_diagnosis(mine.shape, expected.shape)]}
    if not np.isfinite(mine).all():
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(mine))[0])
        return {"name": name, "worst_index": list(bad), "diagnoses": [
            f"NaN or inf at {bad}: a division by zero (a fully masked row, an empty count?) "
            f"or an exp that overflowed"]}
    error, worst = relative_error(mine, expected)
    if error <= MATCH_TOL:
        return None
    return {"name": name, "rel_error": error, "worst_index": list(worst),
            "yours": float(mine[worst]), "expected": float(expected[worst]),
            "diagnoses": value_diagnoses(mine, expected, factors)}


def shape_diagnosis(mine, expected):
    """What a wrong gradient shape says about the mistake."""
    if len(mine) >= 2 and tuple(mine[:-2]) + (mine[-1], mine[-2]) == tuple(expected):
        return (f"shape {tuple(mine)} is the transpose of {tuple(expected)}: a missing transpose "
                f"(.T, or .swapaxes(-1, -2) for stacked matrices)")
    return (f"shape {tuple(mine)}, expected {tuple(expected)}: a sum over the wrong axes? A parameter's "
            f"gradient sums over every position (all axes but the last); an input's keeps its shape")


def constant_ratio(mine, expected):
    """c when mine = c * expected to 1e-6 (and expected is not all zero), else None."""
    norm = float(np.vdot(expected, expected))
    if norm == 0:
        return None
    c = float(np.vdot(mine, expected)) / norm
    residual = np.linalg.norm(mine - c * expected)
    return c if residual <= 1e-6 * max(np.linalg.norm(mine), 1e-300) else None


def _near(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def ratio_diagnosis(c, factors):
    """What a gradient that is exactly c times the right one says about the mistake."""
    if _near(c, -1):
        return "a sign flip: yours is exactly minus the right gradient"
    if _near(c, 0):
        return "all zeros: the gradient is computed but never returned or added into .grad?"
    for name, value in factors.items():
        for sign, flipped in ((1, ""), (-1, " and the sign flipped")):
            if _near(c, sign / value):
                return (f"yours is {c:.4g} times the right gradient everywhere: the factor "
                        f"{name} = {value:.4g} is missing{flipped}")
            if _near(c, sign * value):
                return (f"yours is {c:.4g} times the right gradient everywhere: the factor "
                        f"{name} = {value:.4g} is applied twice{flipped}")
    return (f"yours is {c:.4g} times the right gradient everywhere: a constant factor is missing or "
            f"extra (the 1/sqrt(D) scale, the 1/n of a mean, a count?)")


def value_diagnoses(mine, expected, factors):
    """Diagnoses of a gradient of the right shape with the wrong values."""
    if not mine.any() and expected.any():
        return ["all zeros: the gradient is computed but never returned or added into .grad?"]
    ratio = constant_ratio(mine, expected)
    if ratio is not None:
        return [ratio_diagnosis(ratio, factors)]
    scale = max(np.abs(expected).max(initial=0), 1e-12)
    wrong = np.abs(mine - expected) > MATCH_TOL * scale
    zero = expected == 0
    if zero.any() and wrong.any() and not (wrong & ~zero).any():
        first = tuple(int(i) for i in np.argwhere(wrong)[0])
        return [f"wrong only where the gradient must be exactly 0 ({int(wrong.sum())} masked or "
                f"ignored entries, e.g. {first}): the mask is not applied in the backward"]
    if mine.ndim >= 2 and mine.shape[-1] == mine.shape[-2] and \
            np.allclose(mine, expected.swapaxes(-1, -2), rtol=1e-9, atol=1e-12 * scale):
        return ["yours is the transpose of the right gradient: a missing transpose"]
    return []


def named_factors(case, problem):
    """{name: value} of the constant factors a backward of this case must not lose."""
    floats = [x for x in problem.inputs if _is_float(x)]
    factors = {}
    head_dims = []
    if is_module(problem.target):
        head_dims = [m.head_dim for m in problem.target.modules() if hasattr(m, "head_dim")]
    elif case in ("attention", "flash_attention"):
        head_dims = [floats[0].shape[-1]]
    if head_dims:
        factors["1/sqrt(D)"] = 1 / math.sqrt(head_dims[0])
    if case == "cross_entropy":
        count = int((np.asarray(problem.inputs[1]) != -100).sum())
        factors["1/count (the mean over counted targets)"] = 1 / max(count, 1)
    if floats and not head_dims:
        factors[f"1/d (the mean over the {floats[0].shape[-1]} features)"] = 1 / floats[0].shape[-1]
    return factors


def _changes(problem, G, moved, name):
    before, after = problem.gradients(G)[name], problem.gradients(moved)[name]
    if before is None or after is None or np.shape(before) != np.shape(after):
        return None
    before, after = np.asarray(before), np.asarray(after)
    return np.abs(after - before) > 1e-9 * max(np.abs(before).max(initial=0), 1e-12)


def leak(problem, reference, G, name):
    """A diagnosis when G changed at one position moves ``name``'s gradient where the
    reference's does not move (a sum or mean over the wrong axis), else None."""
    if np.ndim(G) < 2:
        return None
    leading = np.shape(G)[:-1]
    candidates = [(0,) * len(leading), tuple(n - 1 for n in leading)]
    candidates += [tuple(int(problem.rng.integers(n)) for n in leading) for _ in range(2)]
    for position in candidates:
        moved = np.array(G, dtype=np.float64)
        moved[position] += problem.rng.standard_normal(moved.shape[-1])
        mine, right = _changes(problem, G, moved, name), _changes(reference, G, moved, name)
        if mine is None or right is None or mine.shape != right.shape:
            return None
        if not right.any():
            continue                      # this position reaches nothing (masked): try another
        stray = mine & ~right
        if stray.any():
            where = tuple(int(i) for i in np.argwhere(stray)[0])
            return (f"a sum or mean over the wrong axis: when only the upstream gradient at {position} "
                    f"changes, your gradient of {name} also changes at {where}, which that position "
                    f"cannot reach (check axis= and keepdims=True)")
        return None
    return None


def accumulation(problem, G):
    """A diagnosis unless two backward passes leave twice one pass's gradient in every .grad."""
    if not is_module(problem.target) or not problem.target.parameters():
        return None
    once, twice = problem.gradients(G), problem.gradients(G, repeat=2)
    assigned, other = [], []
    for name, p in problem.target.named_parameters():
        scale = max(np.abs(once[name]).max(initial=0), 1e-12)
        if np.allclose(twice[name], 2 * once[name], rtol=1e-9, atol=1e-12 * scale):
            continue
        (assigned if once[name].any() and np.allclose(twice[name], once[name], rtol=1e-9)
         else other).append(name)
    if assigned:
        names = " and ".join(f"{name}.grad" for name in assigned)
        return (f"assigned instead of accumulated: after two backward passes {names} "
                f"{'holds' if len(assigned) == 1 else 'hold'} one pass's gradient, not the sum of both; "
                f"write `.grad += ...` (a layer used twice, like a tied head, must receive both)")
    if other:
        return (f"two backward passes should leave exactly twice one gradient in .grad, but "
                f"{', '.join(other)} hold something else: does backward change .grad another way?")
    return None
