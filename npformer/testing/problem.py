"""One problem, run by any implementation: a target, its inputs, options and upstream gradient.

A *builder* is a function of no arguments returning ``(target, inputs, options)``, as the
gradient-check cases do (``npformer.testing.cases.CASES``): ``target`` is a Module or a
``(forward, backward)`` pair (``backward`` None for a forward-only function). ``evaluate``
calls the builder inside a set of *patches* (``patching.patched``), so the same builder run
with no patches gives npformer's reference, run with a learner's functions patched in gives
the learner's result, and run with a catalogued mistake patched in gives that mistake's.
Everything is float64; a Module's parameters are nudged away from their initial values with
a fixed seed (gamma != 1, biases != 0), as ``gradcheck`` does.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np

from .patching import patched
from .protocol import violation

SEED = 20260611                  # the seed gradcheck uses, so the numbers agree with its report
PRECISION = "float64"            # what a fixed case computes in, so the tolerance it is judged at


def is_module(target):
    """True for a Module, False for a (forward, backward) pair."""
    return hasattr(target, "named_parameters") and hasattr(target, "backward")


def input_names(forward, count):
    """The names of ``forward``'s first ``count`` positional parameters ("x", "weight" ...)."""
    try:
        names = [p.name for p in inspect.signature(forward).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return [names[i] if i < len(names) else f"input[{i}]" for i in range(count)]


def is_float_array(x):
    """True for a floating-point ndarray (an input that gets a gradient)."""
    return isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.floating)


@dataclass
class Result:
    """What one implementation computed on one problem.

    ``outputs``: {name: array} of the forward's outputs ("out", or "data", "m", "v" for a
    function returning several); ``grads``: {name: array or None} of every float input and
    parameter after ``repeat`` backward passes; ``error``: the exception raised, if any.
    """

    outputs: dict = field(default_factory=dict)
    grads: dict = field(default_factory=dict)
    error: BaseException | None = None
    upstream: np.ndarray | None = None
    params: tuple = ()              # which of ``grads`` are a Module's parameters (in .grad)
    protocol: str | None = None     # what the backward wrote into (d_out, cache, inputs), if anything
    data: tuple = ()                # the float inputs and parameters: the scale results are judged at

    @property
    def ok(self):
        """True when the implementation ran without raising."""
        return self.error is None

    def outcome(self):
        """({check name: array}, error), the form ``diagnosis.same`` compares: "output" (or
        "output <name>") and "gradient of <name>" as conform names them."""
        values = {("output" if name == "out" else f"output {name}"): value for name, value in self.outputs.items()}
        values.update({f"gradient of {name}": value for name, value in self.grads.items()})
        return values, self.error


def _as_float64(inputs):
    return [np.asarray(x, np.float64) if np.issubdtype(np.asarray(x).dtype, np.floating) else x
            for x in inputs]


def prepare(target, randomize=True):
    """A float64 copy of a Module with its parameters nudged (fixed seed); a pair unchanged."""
    if not is_module(target):
        return target
    target = target.astype(np.float64)
    if randomize:
        rng = np.random.default_rng(SEED)
        for p in target.parameters():
            p.data += 0.3 * rng.standard_normal(p.shape)
    return target


def output_dict(out, names=("data", "m", "v")):
    """{name: array} of a forward's output: one array ("out"), or a tuple of them."""
    if isinstance(out, tuple):
        return {names[i] if i < len(names) else f"output[{i}]": np.asarray(o, np.float64)
                for i, o in enumerate(out)}
    return {"out": np.asarray(out, np.float64)}


def upstream_like(out, seed=SEED):
    """A random upstream gradient G shaped like ``out`` (never all ones: that hides mistakes)."""
    return np.random.default_rng(seed + 1).standard_normal(np.shape(out))


def _backward_grads(target, inputs, names, cache, upstream, repeat, result=None):
    forward_is_module = is_module(target)
    if forward_is_module:
        target.zero_grad()
    for _ in range(repeat):              # a fresh G each time: backward may not keep it intact
        given = np.array(upstream)
        check = violation(given, cache, inputs, names)
        returned = (target.backward if forward_is_module else target[1])(given, cache)
        if result is not None and result.protocol is None:
            result.protocol = check()
    returned = returned if isinstance(returned, tuple) else (returned,)
    grads = {name: (returned[i] if i < len(returned) else None)
             for i, (name, x) in enumerate(zip(names, inputs)) if is_float_array(x)}
    if forward_is_module:
        grads.update({name: p.grad.copy() for name, p in target.named_parameters()})
    return grads


def run(build, upstream=None, repeat=1, own_upstream=True):
    """``Result`` of one problem as npformer computes it now (whatever is patched in).
    ``upstream``: the gradient G to send back (default: the case's own when it has one and
    ``own_upstream``, else a random one). NaN and overflow are results, not warnings."""
    result = Result()
    try:
        with np.errstate(all="ignore"):
            _compute(build, upstream, repeat, own_upstream, result)
    except Exception as error:           # the implementation raised: the result says so
        result.error = error
    return result


def _compute(build, upstream, repeat, own_upstream, result):
    target, inputs, options = build()
    options = dict(options)
    given = options.pop("upstream", None)
    randomize = options.pop("randomize", True)
    target, inputs = prepare(target, randomize), _as_float64(inputs)
    forward = target.forward if is_module(target) else target[0]
    backward = target.backward if is_module(target) else target[1]
    names = input_names(forward, len(inputs))
    result.data = tuple(inputs) + (tuple(p.data for p in target.parameters()) if is_module(target) else ())
    if backward is None:
        result.outputs = output_dict(forward(*inputs, **options))
        return
    out, cache = forward(*inputs, **options)
    result.outputs = output_dict(out)
    if upstream is None:
        upstream = given if given is not None and own_upstream else upstream_like(out)
    result.upstream = np.asarray(upstream, np.float64)
    result.grads = _backward_grads(target, inputs, names, cache, result.upstream, repeat, result)
    if is_module(target):
        result.params = tuple(name for name, _ in target.named_parameters())


def evaluate(build, patches=None, upstream=None, repeat=1):
    """``run`` with ``patches`` ({"npformer.module.qualname": function}) in place."""
    with patched(patches or {}):
        return run(build, upstream, repeat)


def same_error(a, b):
    """True when two exceptions are the same error: one type, one message."""
    return a is not None and b is not None and type(a) is type(b) and str(a) == str(b)
