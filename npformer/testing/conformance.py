"""``conform``: check someone's implementation of a component against npformer's reference.

It draws inputs with hypothesis (``strategies``), runs the implementation and npformer's
plain-track reference in float64 on each, compares the output and every gradient, and checks
the component's properties on the implementation's own results. A failing check is searched
again until hypothesis has shrunk it to its smallest example, and that example is run through
the catalogued mistakes (``mistakes``): when one of them computes exactly what the
implementation computed, the report names it.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import example as hypothesis_example
from hypothesis import seed as hypothesis_seed

from . import components as catalogue
from . import mistakes, properties, strategies
from .compare import compare_tensor, equal
from .patching import patched
from .report import CheckResult, ConformanceReport, Failure
from .subject import Subject, describe_error

TOLERANCES = {"float64": 1e-9, "float32": 1e-4, "float16": 1e-2, "bfloat16": 2e-2}


class _Found(Exception):
    """Raised inside a hypothesis search to mark an example as failing."""


def search(strategy, failing, examples, seed, corners=()):
    """The smallest example hypothesis can find for which ``failing(example)`` is true, or None.
    ``corners``: examples tried first, whatever hypothesis draws (one that fails is shrunk)."""
    found = []

    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
              phases=(Phase.explicit, Phase.generate, Phase.shrink), verbosity=Verbosity.quiet)
    @given(strategy)
    def probe(example):
        if failing(example):
            found.append(example)
            raise _Found
    for corner in reversed(corners):
        probe = hypothesis_example(corner)(probe)
    try:
        probe()
    except _Found:
        return found[-1]                  # the last one hypothesis ran: the smallest
    return None


def factors(component, example):
    """{name: value} of the constant factors a gradient of this component must not lose."""
    args = dict(zip(example.names, example.args))
    if "q" in args:
        return {"1/sqrt(D)": 1 / math.sqrt(args["q"].shape[-1])}
    if component == "cross_entropy":
        count = int((args["targets"] != -100).sum())
        return {"1/count (the mean over counted targets)": 1 / max(count, 1)}
    if "x" in args and component in ("layernorm", "rmsnorm"):
        return {f"1/d (the mean over the {args['x'].shape[-1]} features)": 1 / args["x"].shape[-1]}
    return {}


class Checker:
    """Runs the implementation and the reference on examples; keeps what each check saw."""

    def __init__(self, subject, rtol=None, atol=0.0):
        self.subject, self.reference = subject, Subject.reference(subject.component)
        self.component = subject.component
        self.rtol, self.atol, self.dtype = rtol, atol, None
        self.properties = [p for p in properties.of(self.component.name) if p.drawn and
                           (subject.differentiates or not p.needs_backward)]
        self.results, self.seen, self.shrinking = {}, [], False
        self.candidates = mistakes.of_functions(self.component.functions)
        self.corners = strategies.corner_examples(self.component.name)

    def tolerance(self):
        """The relative tolerance: given, or the one of the implementation's output dtype."""
        return self.rtol if self.rtol is not None else TOLERANCES.get(self.dtype or "float64", 1e-9)

    def _dtype_of(self, example):
        if self.dtype is None:
            try:
                out = self.subject.output(example.args, example.options)
                first = out[0] if isinstance(out, tuple) else out
                self.dtype = str(getattr(first, "dtype", "float64"))
            except Exception:               # noqa: BLE001 - the comparison will say what failed
                self.dtype = "float64"

    def compare(self, example):
        """{check name: failure message or None} on one example."""
        self._dtype_of(example)
        mine, error = self.subject.outcome(example)
        right, _ = self.reference.outcome(example)
        if not self.subject.differentiates:
            right = {name: value for name, value in right.items() if name.startswith("output")}
        found = {}
        for name, expected in right.items():
            if error:
                found[name] = f"your implementation raised {error}"
                continue
            mismatch = compare_tensor(name, mine.get(name), expected, factors(self.component.name, example),
                                      self.tolerance(), self.atol)
            found[name] = None if mismatch is None else mismatch
        for prop in self.properties:
            found[prop.text] = self._property(prop, example)
        return found

    def _property(self, prop, example):
        try:
            with np.errstate(all="ignore"):             # NaN and overflow are results too
                prop.check(self.subject, example)
            return None
        except properties.PropertyFailed as failure:
            return str(failure)
        except Exception as error:         # noqa: BLE001 - the implementation's own error
            return f"your implementation raised {describe_error(error)}"

    def record(self, example):
        """``compare`` and remember: which checks ran, and the first few examples."""
        found = self.compare(example)
        if self.shrinking:                  # hypothesis is shrinking a failure: count nothing more
            return any(f is not None for f in found.values())
        if len(self.seen) < 4:
            self.seen.append(example)
        self.shrinking = any(f is not None for f in found.values())
        for name, failure in found.items():
            kind = "output" if name.startswith("output") else "gradient" if name.startswith("gradient") \
                else "property"
            check = self.results.setdefault(name, CheckResult(name, kind))
            check.examples += 1
            if failure is not None and check.failure is None:
                check.failure = Failure(None, failure if isinstance(failure, str) else failure["message"])
        return any(f is not None for f in found.values())


def _message(found):
    return found if isinstance(found, str) else found["message"]


def conform(component, forward, backward=None, *, vjp=None, examples=100, seed=0, rtol=None, atol=0.0):
    """Check ``forward`` (and ``backward`` or ``vjp``) against npformer's ``component``.

    ``component``: a name of ``npformer.testing.COMPONENTS`` ("softmax", "attention",
    "grouped_attention", "layernorm", "cross_entropy" ...); each documents its signature.
    ``forward`` may also be an adapter such as ``from_torch(fn)``, which brings its own vjp.
    ``examples``: inputs drawn per search; ``seed``: the hypothesis seed (same seed, same
    examples); ``rtol``: relative tolerance (default: by the output's dtype, 1e-9 for float64,
    1e-4 for float32); ``atol``: absolute tolerance added to it.
    Returns a ``ConformanceReport``: ``ok``, each check, and for a failure its smallest
    example, the worst element, and the catalogued mistake it matches when one does.
    """
    subject = as_subject(component, forward, backward, vjp)
    checker = Checker(subject, rtol, atol)
    report = ConformanceReport(subject.component.name, subject.name, examples, seed, 0.0, "float64")
    failing = search(subject.component.draw, checker.record, examples, seed, checker.corners)
    report.tolerance, report.dtype = checker.tolerance(), checker.dtype or "float64"
    if failing is not None:
        for check in checker.results.values():
            if check.failure is not None:
                check.failure = smallest_failure(checker, check.name, examples, seed)
    report.checks = list(checker.results.values()) + fixed_properties(subject)
    mistakes.settle([c.failure for c in report.checks if c.failure is not None])
    if not subject.differentiates and not subject.component.forward_only:
        report.checks.append(CheckResult("gradients", "gradient", skipped="no backward or vjp given"))
    return report


def as_subject(component, forward, backward=None, vjp=None):
    """A ``Subject`` from conform's arguments (an adapter brings its own forward and vjp)."""
    name = getattr(forward, "__name__", None)
    if hasattr(forward, "vjp") and hasattr(forward, "forward"):          # from_torch, from_jax
        forward, vjp, name = forward.forward, forward.vjp, forward.name
    component = catalogue.find(component)
    if component.name == "kv_decode":
        step = forward

        def forward(q, k, v):                                            # noqa: F811 - the step, looped
            from .references import decode_all
            return decode_all(step, q, k, v)
    return Subject(component, forward, backward, vjp, name=name)


def smallest_failure(checker, name, examples, seed):
    """The check ``name``'s failure on the smallest example hypothesis finds, diagnosed."""
    def fails(example):
        return checker.compare(example).get(name) is not None
    example = search(checker.component.draw, fails, examples, seed, checker.corners)
    if example is None:                                   # flaky: keep what the first search saw
        return checker.results[name].failure
    found = checker.compare(example)[name]
    failure = Failure(example, _message(found), diagnoses=[] if isinstance(found, str) else found["diagnoses"])
    if not name.startswith(("output", "gradient")):
        return failure
    failure.matches = matching_mistakes(checker, [example] + checker.seen)
    failure.mistake = failure.matches[0] if failure.matches else None
    if failure.mistake is not None:
        failure.diagnoses = []
    return failure


def matching_mistakes(checker, examples):
    """The catalogued mistakes that compute exactly what the implementation computed on every
    one of ``examples`` (and differ from the reference on one), in catalogue order."""
    tol = checker.tolerance()
    theirs = [checker.subject.outcome(e)[0] for e in examples]
    right = [checker.reference.outcome(e)[0] for e in examples]
    found = []
    for candidate in checker.candidates:
        with patched(candidate.patches()):
            wrong = [checker.reference.outcome(e)[0] for e in examples]
        if all(_same(w, t, tol) for w, t in zip(wrong, theirs)) and \
                not all(_same(w, r, 1e-12) for w, r in zip(wrong, right)):
            found.append(candidate)
    return found


def _same(a, b, tol):
    """True when two outcomes hold the same names and equal arrays (``compare.equal``)."""
    return bool(a) and set(a) == set(b) and all(equal(x, b[name], tol) for name, x in a.items())


def fixed_properties(subject):
    """The component's properties on fixed numbers, each run once."""
    results = []
    for prop in properties.of(subject.component.name):
        if prop.drawn or (prop.needs_backward and not subject.differentiates):
            continue
        check = CheckResult(prop.text, "property", examples=1)
        try:
            with np.errstate(all="ignore"):
                prop.check(subject, None)
        except properties.PropertyFailed as failure:
            check.failure = Failure(None, str(failure))
        except Exception as error:         # noqa: BLE001 - the implementation's own error
            check.failure = Failure(None, f"your implementation raised {describe_error(error)}")
        results.append(check)
    return results
