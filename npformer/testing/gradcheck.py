"""Finite-difference gradient checking for any module or forward/backward pair.

How it works. Pick a random upstream gradient G (never all ones: with ones,
errors that cancel across outputs would go unseen) and define the scalar
L(inputs, params) = sum(forward(...) * G). The hand-written backward, fed G,
must produce dL/d(input) and dL/d(param). We compare those with central
differences (L(x + eps e) - L(x - eps e)) / (2 eps) in float64:

- tensors with at most ``exact_limit`` elements: every element (the full gradient);
- larger tensors: ``directions`` random unit directions u, comparing <grad, u>.

The relative error of a tensor is max |numeric - analytic| / max(|numeric|, |analytic|),
the maxima taken over the tensor.

Use it on your own module::

    import numpy as np
    from npformer import gradcheck
    from npformer.t08_norm import RMSNorm

    report = gradcheck(RMSNorm(16), np.random.default_rng(0).standard_normal((2, 5, 16)))
    print(report)            # one line per input and parameter, worst error and index
    assert report.ok

or on a function pair: ``gradcheck((softmax_forward, softmax_backward), x)``.
Keyword arguments (masks, positions, ...) go to forward and are not differentiated.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.module import Module


@dataclass
class TensorCheck:
    """One tensor's result: name, shape, relative error, worst index, exact or projected."""

    name: str
    shape: tuple
    rel_error: float
    worst_index: tuple | int | None   # element index (exact) or direction number (projected)
    mode: str                          # "exact" or "projected"


@dataclass
class GradcheckReport:
    """Per-tensor results; ``ok`` when every relative error is within ``tol``."""

    checks: list = field(default_factory=list)
    tol: float = 1e-6

    @property
    def worst(self):
        """The check with the largest relative error (None if there were none)."""
        return max(self.checks, key=lambda c: c.rel_error) if self.checks else None

    @property
    def max_rel_error(self):
        """The largest relative error of any tensor (0.0 if none was checked)."""
        return max((c.rel_error for c in self.checks), default=0.0)

    @property
    def ok(self):
        """True when every relative error is within ``tol``."""
        return self.max_rel_error <= self.tol

    def __bool__(self):
        # ``assert gradcheck(...)`` fails on a wrong backward
        return self.ok

    def __str__(self):
        lines = [f"{'tensor':32} {'shape':>16} {'rel. error':>11}  worst at  ({self.tol:.0e} allowed)"]
        for c in self.checks:
            flag = "" if c.rel_error <= self.tol else "   <-- FAIL"
            lines.append(f"{c.name:32} {str(c.shape):>16} {c.rel_error:11.2e}  "
                         f"{c.mode} {c.worst_index}{flag}")
        return "\n".join(lines)


_DEFAULT_SEED = 20260611


class GradcheckError(AssertionError):
    """Raised by ``assert_gradcheck``; the message is the report."""


def _as_pair(target):
    if isinstance(target, Module):
        return target.forward, target.backward, target
    forward, backward = target
    return forward, backward, None


def gradcheck(target, *inputs, rng=None, eps=1e-6, tol=1e-6, exact_limit=64, directions=6,
              randomize=True, upstream=None, **options):
    """Check the backward of ``target`` (a Module or a (forward, backward) pair).

    ``target`` is converted to float64 (a copy), its parameters nudged by random
    noise when ``randomize`` (so gamma != 1, biases != 0), float inputs cast to
    float64. Integer inputs (token ids, positions) are passed through, not checked.
    Returns a ``GradcheckReport`` with one row per float input and per parameter.
    """
    if not isinstance(target, Module) and not (isinstance(target, (tuple, list)) and len(target) == 2
                                               and all(map(callable, target))):
        raise TypeError(f"target: expected a Module or a (forward, backward) pair of functions, "
                        f"got {type(target).__name__} {target!r:.60}")
    # A default seed of its own, so the upstream gradient never replays a caller's seeded input.
    rng = np.random.default_rng(_DEFAULT_SEED) if rng is None else rng
    if isinstance(target, Module):
        target = target.astype(np.float64)
        if randomize:
            for p in target.parameters():
                p.data += 0.3 * rng.standard_normal(p.shape)
    forward, backward, module = _as_pair(target)
    inputs = [np.asarray(x, np.float64) if np.issubdtype(np.asarray(x).dtype, np.floating) else x
              for x in inputs]
    params = list(module.named_parameters()) if module is not None else []

    out, cache = forward(*inputs, **options)
    G = rng.standard_normal(np.shape(out)) if upstream is None else upstream

    def loss():
        value, _ = forward(*inputs, **options)
        return float(np.sum(np.asarray(value) * G))

    if module is not None:
        module.zero_grad()
    grads = backward(G, cache)
    grads = grads if isinstance(grads, tuple) else (grads,)

    tensors = []
    for i, x in enumerate(inputs):
        if isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.floating):
            if i >= len(grads) or grads[i] is None:
                raise ValueError(f"gradcheck: backward returned no gradient for float input {i}")
            tensors.append((f"input[{i}]", x, np.asarray(grads[i])))
    for name, p in params:
        tensors.append((name, p.data, p.grad.copy()))

    report = GradcheckReport(tol=tol)
    for name, array, analytic in tensors:
        if analytic.shape != array.shape:
            raise ValueError(f"gradcheck: gradient of {name} has shape {analytic.shape}, "
                             f"expected {array.shape}")
        report.checks.append(_check_tensor(name, array, analytic, loss, rng, eps,
                                           exact_limit, directions))
    return report


def _central(array, index_or_direction, loss, eps):
    """(L(x + eps u) - L(x - eps u)) / 2 eps, perturbing ``array`` in place and restoring it."""
    saved = array.copy()
    if isinstance(index_or_direction, np.ndarray):
        array += eps * index_or_direction
        plus = loss()
        array[...] = saved - eps * index_or_direction
        minus = loss()
    else:
        array[index_or_direction] = saved[index_or_direction] + eps
        plus = loss()
        array[index_or_direction] = saved[index_or_direction] - eps
        minus = loss()
    array[...] = saved
    return (plus - minus) / (2 * eps)


def _check_tensor(name, array, analytic, loss, rng, eps, exact_limit, directions):
    if array.size <= exact_limit:
        numeric = np.zeros(array.shape)
        for index in np.ndindex(array.shape):
            numeric[index] = _central(array, index, loss, eps)
        diff = np.abs(numeric - analytic)
        scale = max(np.abs(numeric).max(initial=0), np.abs(analytic).max(initial=0), 1e-12)
        worst = np.unravel_index(int(np.argmax(diff)), array.shape) if array.size else None
        return TensorCheck(name, array.shape, float(diff.max(initial=0) / scale),
                           tuple(int(i) for i in worst) if worst is not None else None, "exact")
    numeric, projected = [], []
    for _ in range(directions):
        u = rng.standard_normal(array.shape)
        u = u / np.linalg.norm(u)                  # a random unit direction
        numeric.append(_central(array, u, loss, eps))
        projected.append(float(np.sum(analytic * u)))
    numeric, projected = np.array(numeric), np.array(projected)
    diff = np.abs(numeric - projected)
    scale = max(np.abs(numeric).max(), np.abs(projected).max(), 1e-12)
    return TensorCheck(name, array.shape, float(diff.max() / scale), int(np.argmax(diff)), "projected")


def assert_gradcheck(target, *inputs, **kwargs):
    """``gradcheck`` that raises ``GradcheckError`` (with the report) unless every tensor passes."""
    report = gradcheck(target, *inputs, **kwargs)
    if not report.ok:
        w = report.worst
        raise GradcheckError(f"gradient check failed: {w.name} relative error {w.rel_error:.3e} "
                             f"at {w.mode} {w.worst_index}, tolerance {report.tol:.0e}\n{report}")
    return report
