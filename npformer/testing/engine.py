"""The engine's one entry for the grader (``npformer.exercises``): what it needs, in one place.

``judge_functions`` judges some of npformer's functions as a computation computes them (the
learner's, patched in here or computed in their own process: ``computation``): each component on drawn inputs (``conformance.Checker``: output, every
gradient, the properties, each failure shrunk and its catalogued mistake named) and each fixed
case (``judge.judge_case``), both with the same matcher and verdict types. The grader keeps its
own parts (the learner's files, its claims about whole models, its patched subject, its JSON).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .cases import CASES
from .components import component_named as component
from .checker import Checker, compared_failures
from .computation import ClaimRun, Patched
from .fixed_case import judge_case
from .mistakes import agreeing_mistakes
from .mistakes.registry import applicable, of_functions
from .structure import Structural
from .structure import candidates as structural
from .patching import patched, resolve
from .problem import same_error
from .report import CaseVerdict, CheckResult
from .subject import Subject, describe_error

__all__ = ["CASES", "CaseVerdict", "CheckResult", "ClaimRun", "Judged", "Patched", "Subject", "candidates",
           "component", "describe_error", "judge_functions", "patched", "resolve", "same_error", "agreeing_mistakes"]


def candidates(paths):
    """[(mistake, its patches)] of ``paths`` (npformer functions, "t03_softmax.softmax_backward"):
    the catalogued mistakes, each compiled once (a stale one, its function's text changed since,
    is left out), then the structural ones of their backwards (``structure``: on drawn inputs and
    fixed cases they are tried only for failures the catalogue leaves unexplained, or explains in
    several functions at once)."""
    return applicable(of_functions(paths))[0] + structural(paths)


def _written(found, code):
    """The candidates in functions ``code`` holds (a learner is told of mistakes only in the
    functions they wrote), all of them when the computation does not say which it holds."""
    held = getattr(code, "functions", None)
    if held is None:
        return list(found)
    return [c for c in found if f"npformer.{(c[0] if isinstance(c, tuple) else c).function}" in held]


@dataclass
class Judged:
    """What ``judge_functions`` found: (component, CheckResult) on drawn inputs, (case, size,
    CaseVerdict) of the fixed cases; ``failures()`` are those compared with the catalogue."""

    drawn: list = field(default_factory=list)
    fixed: list = field(default_factory=list)

    def failures(self):
        """The failures whose mistakes ``agreeing_mistakes`` chooses together (with any of the caller's own)."""
        names = dict.fromkeys(name for name, _ in self.drawn)
        compared = [f for name in names for f in compared_failures([c for n, c in self.drawn if n == name])]
        return compared + [verdict for _, _, verdict in self.fixed if not verdict.ok]


def judge_functions(code, components=(), cases=(), mistakes=(), examples=40, seed=0, extra_seeds=(),
                    progress=None, precision="float64"):
    """A ``Judged`` of the code under test, ``code`` (a computation: ``Patched(patches)``, or a
    learner's process), at ``precision`` (the judge's choice, never read from a reply).

    ``components``: names judged on ``examples`` drawn inputs (hypothesis ``seed``), each with
    ``code.subject(name)``;
    ``cases``: (case name, sizes) of ``CASES``, each judged with ``code.evaluate``, and again
    with each of ``extra_seeds`` (other numbers, the same sizes) until one fails;
    ``mistakes``: the candidates (``candidates(paths)``); ``progress(text)``: told each stage.
    The failures' mistakes are chosen to agree among themselves; choose again with the caller's own."""
    judged = Judged()
    mistakes = _written(mistakes, code)
    deferred = [c for c in mistakes if isinstance(c[0] if isinstance(c, tuple) else c, Structural)]
    first = [c for c in mistakes if not any(c is d for d in deferred)]
    for name in components:
        if progress:
            progress(f"{name} on drawn inputs")
        checker = Checker(code.subject(name), precision=precision)
        checker.candidates = first              # the patched functions' own, not the component's
        checker.deferred = deferred
        judged.drawn += [(name, check) for check in checker.run(examples, seed)]
    for case, sizes in cases:
        for size in sizes:
            for extra in (None,) + tuple(extra_seeds):
                if progress:
                    progress(f"{case} (size {size})")
                build = (lambda case=case, size=size, extra=extra:
                         CASES[case](np.random.default_rng(size if extra is None else extra + size), size))
                build.key = (case, size, extra)          # a learner's process rebuilds it from this
                verdict = judge_case(build, code, first, deferred)
                judged.fixed.append((case, size, verdict))
                if not verdict.ok:
                    break                              # one failing seed says it; the rest add time
    agreeing_mistakes(judged.failures())
    return judged
