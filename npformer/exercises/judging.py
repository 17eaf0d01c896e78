"""Judging one exercise with ``npformer.testing``: the learner's functions patched in, alone.

Three kinds of check, all with npformer's own code everywhere but the exercise's functions:
the exercise's components on drawn inputs (``conformance``: output, every gradient, the
properties, the smallest failing example and the catalogued mistake), its gradient-check
cases at fixed sizes (``judge``: every gradient, ``.grad`` accumulation, the mistake or a
generic diagnosis), and the claims about whole models (``claims``).
"""
from __future__ import annotations

import numpy as np

from ..testing import mistakes
from ..testing.cases import CASES
from ..testing.components import find
from ..testing.conformance import Checker, compared_failures
from ..testing.judge import judge_case
from ..testing.patching import patched
from ..testing.problem import same_error
from ..testing.subject import Subject, describe_error
from . import claims

EXAMPLES = 40                    # drawn inputs per component (and per search for a failing one)
SEED = 0
EXTRA_SEEDS = (101, 202)         # exercises judged on fixed cases alone: each case again, other numbers


class PatchedSubject(Subject):
    """npformer's reference of a component, run with the learner's functions patched in."""

    def __init__(self, component, patches):
        forward, backward = find(component).reference_pair()
        super().__init__(component, forward, backward, name="yours")
        self.patches = patches

    def result(self, example):
        """``Subject.result`` (and so ``outcome``) inside the patches."""
        with patched(self.patches):
            return super().result(example)

    def output(self, args, options):
        """``Subject.output`` inside the patches."""
        with patched(self.patches):
            return super().output(args, options)

    def gradients(self, args, options, d_out):
        """``Subject.gradients`` inside the patches."""
        with patched(self.patches):
            return super().gradients(args, options, d_out)


def _mistake_json(found):
    if found is None:
        return None
    return {"name": found.name, "function": found.qualname, "says": found.says, "recheck": found.recheck}


def judge_component(name, patches, candidates):
    """[CheckResult] of one component on drawn inputs, each failure at its smallest example."""
    # patches that compute in the learner's process bring their own subject
    checker = Checker(patches.subject(name) if hasattr(patches, "subject") else PatchedSubject(name, patches))
    checker.candidates = candidates                   # the exercise's own functions are the patched ones
    return checker.run(EXAMPLES, SEED)


def _component_entry(name, check):
    failure = check.failure
    return {"component": name, "check": check.name, "kind": check.kind, "ok": check.passed,
            "examples": check.examples, "message": failure and failure.message,
            "mistake": failure and _mistake_json(failure.mistake),
            "diagnoses": failure.diagnoses if failure and failure.mistake is None else [],
            "example": failure.example.describe() if failure and failure.example else None}


class _CaseFailure:
    """A fixed case's verdict seen as a failure with candidate mistakes, for ``settle``."""

    def __init__(self, verdict):
        self.verdict, self.matches, self.mistake = verdict, verdict["matches"], verdict["mistake"]


def _case_entry(case, size, verdict):
    error = verdict["error"]
    return {"case": case, "size": size, "ok": verdict["ok"], "tensors": [
        {k: v for k, v in t.items() if k in ("name", "message", "diagnoses")} for t in verdict["tensors"]],
        "notes": verdict["notes"], "mistake": _mistake_json(verdict["mistake"]),
        "error": describe_error(error) if error is not None else None}


def _run_claim(check, patches):
    """(ok, detail, error) of one claim with ``patches`` in place; ``error``: the exception the
    code raised, if it did."""
    import npformer
    if hasattr(patches, "claim"):              # run in the learner's process
        return patches.claim(check)
    try:
        with patched(patches), np.errstate(all="ignore"):
            return True, check(npformer, npformer), None
    except claims.ClaimFailed as failure:
        return False, str(failure), None
    except Exception as error:                 # noqa: BLE001 - the learner's code raised
        return False, f"your code raised {describe_error(error)}", error


class _ClaimFailure:
    """A failing claim seen as a failure with candidate mistakes: those that fail it with the
    very same numbers, or raise the very same error (its file and line are the candidate's)."""

    def __init__(self, entry, check, error, candidates):
        self.entry = entry
        self.matches = [m for m in candidates if self._same(_run_claim(check, m.patches()), error)]
        self.mistake = self.matches[0] if self.matches else None

    def _same(self, outcome, error):
        ok, detail, raised = outcome
        if error is not None or raised is not None:
            return same_error(raised, error)
        return not ok and detail == self.entry["detail"]


def _claims(exercise, patches, progress, candidates):
    """[entry] of the exercise's claims, and the failures among them for ``settle``."""
    entries, failures = [], []
    for text, check in claims.of(exercise.name):
        _say(progress, text)
        ok, detail, error = _run_claim(check, patches)
        entry = {"claim": text, "ok": ok, "detail": detail}
        if not ok:
            failures.append(_ClaimFailure(entry, check, error, candidates))
        entries.append(entry)
    return entries, failures


def judge_exercise(exercise, patches, progress=None):
    """{"exercise", "checks": [...], "claims": [...]} of one exercise with ``patches`` in place
    (the training task's: every component the learner wrote)."""
    candidates = mistakes.of_functions(exercise.paths(forward=True))
    drawn, fixed = [], []
    for name in exercise.components:
        _say(progress, f"{name} on drawn inputs")
        drawn += [(name, check) for check in judge_component(name, patches, candidates)]
    # without drawn inputs, each fixed case runs on more random numbers too (same sizes)
    seeds = (None,) + (EXTRA_SEEDS if not exercise.components else ())
    for case, sizes in exercise.checks:
        for size in sizes:
            for seed in seeds:
                _say(progress, f"{case} (size {size})")
                build = (lambda case=case, size=size, seed=seed:
                         CASES[case](np.random.default_rng(size if seed is None else seed + size), size))
                build.key = (case, size, seed)           # the learner's process rebuilds it from this
                verdict = judge_case(build, patches, candidates)
                fixed.append((case, size, _CaseFailure(verdict)))
                if not verdict["ok"]:
                    break                              # one failing seed says it; the rest add time
    claim_entries, claim_failures = _claims(exercise, patches, progress, candidates)
    # several mistakes may fit one check: name the one that fits them all
    compared = [f for name in exercise.components for f in compared_failures([c for n, c in drawn if n == name])]
    mistakes.settle(compared + [f for _, _, f in fixed if not f.verdict["ok"]] + claim_failures)
    for _, _, found in fixed:
        found.verdict["mistake"] = found.mistake
    for found in claim_failures:
        found.entry["mistake"] = _mistake_json(found.mistake)
    checks = [_component_entry(name, check) for name, check in drawn]
    checks += [_case_entry(case, size, found.verdict) for case, size, found in fixed]
    return {"exercise": exercise.name, "checks": checks, "claims": claim_entries, "error": None}


def _say(path, text):
    """The stage now running, for the grader's progress line."""
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
