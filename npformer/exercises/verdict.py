"""Judging one exercise with ``npformer.testing``: the learner's functions in place, alone.

Three kinds of check, all with npformer's own code everywhere but the exercise's functions:
the exercise's components on drawn inputs (output, every gradient, the properties, the
smallest failing example and the catalogued mistake) and its gradient-check cases at fixed
sizes (every gradient, ``.grad`` accumulation, the mistake or a generic diagnosis), both
through the engine's one entry (``npformer.testing.engine``), and the claims about whole
models (``claims``), the grader's own. The code under test is a computation
(``engine.Patched`` here, or a learner's process behind the walls): the judge chooses every
input, the precision (float64, as the hand-out computes) and compares every array itself.
"""
from __future__ import annotations

import os

from ..testing import engine
from ..testing.engine import Patched, same_error
from ..testing.problem import PRECISION
from . import claim_verdicts

EXAMPLES = 40                    # drawn inputs per component (and per search for a failing one)
EXAMPLES_VARIABLE = "NPFORMER_GRADE_EXAMPLES"    # the teacher's number instead, read at each grading
SEED = 0
EXTRA_SEEDS = (101, 202)         # exercises judged on fixed cases alone: each case again, other numbers


def examples():
    """Drawn inputs per component: ``NPFORMER_GRADE_EXAMPLES`` when set, else ``EXAMPLES``."""
    return int(os.environ.get(EXAMPLES_VARIABLE) or EXAMPLES)


def _mistake_json(found):
    if found is None:
        return None
    return {"name": found.name, "function": found.qualname, "says": found.says, "recheck": found.recheck}


def _component_entry(name, check):
    failure = check.failure
    return {"component": name, "check": check.name, "kind": check.kind, "ok": check.passed,
            "examples": check.examples, "message": failure and failure.message,
            "mistake": failure and _mistake_json(failure.mistake),
            "diagnoses": failure.diagnoses if failure and failure.mistake is None else [],
            "example": failure.example.describe() if failure and failure.example else None}


def _case_entry(case, size, verdict):
    error = verdict.error
    return {"case": case, "size": size, "ok": verdict.ok, "tensors": [
        {"name": c.name, "message": c.failure.message, "diagnoses": c.failure.diagnoses} for c in verdict.checks],
        "notes": verdict.notes, "mistake": _mistake_json(verdict.mistake),
        "error": engine.describe_error(error) if error is not None else None}


_OURS = {}


def ours(check):
    """npformer's own ``ClaimRun`` of ``check`` (None for a claim not ``compared``), run once."""
    if not getattr(check, "compared", True):
        return None
    if check not in _OURS:
        run = Patched().claim(check)
        if run.error is not None:              # the claim cannot run on npformer itself: its bug
            raise run.error
        _OURS[check] = run
    return _OURS[check]


class _ClaimFailure:
    """A failing claim seen as a failure with candidate mistakes: those whose run of the claim
    fails it with the very same account, or raises the very same error."""

    def __init__(self, entry, check, decision, candidates):
        self.entry = entry
        self.matches = [m for m, wrong in candidates if self._same(check, Patched(wrong).claim(check), decision)]
        self.mistake = self.matches[0] if self.matches else None

    @staticmethod
    def _same(check, run, decision):
        if decision.error is not None or run.error is not None:
            return same_error(run.error, decision.error)
        theirs = claim_verdicts.decide(check, run, ours(check))
        return not theirs.ok and theirs.detail == decision.detail


def _claims(exercise, code, progress, candidates):
    """[entry] of the exercise's claims, and the failures among them for ``agreeing_mistakes``."""
    entries, failures = [], []
    for text, check in claim_verdicts.claims_of(exercise.name):
        progress(text)
        decision = claim_verdicts.decide(check, code.claim(check), ours(check))
        entry = {"claim": text, "ok": decision.ok, "detail": decision.detail, "verified": decision.verified}
        if not decision.ok:
            failures.append(_ClaimFailure(entry, check, decision, candidates))
        entries.append(entry)
    return entries, failures


def judge_component(name, code, candidates):
    """[CheckResult] of one component on drawn inputs as ``code`` computes it, each failure at
    its smallest example, compared with ``candidates`` (the catalogued mistakes)."""
    judged = engine.judge_functions(code, components=[name], mistakes=candidates, examples=examples(),
                                    seed=SEED, precision=PRECISION)
    return [check for _, check in judged.drawn]


def judge_exercise(exercise, code, progress=None):
    """{"exercise", "checks": [...], "claims": [...]} of one exercise as ``code`` (a
    computation: the learner's functions in place) computes it; ``progress(text)`` hears each
    stage as it begins."""
    progress = progress or (lambda text: None)
    candidates = engine.candidates(exercise.paths(forward=True))
    judged = engine.judge_functions(
        code, exercise.components, exercise.checks, candidates, examples(), SEED,
        extra_seeds=EXTRA_SEEDS if not exercise.components else (),     # without drawn inputs, more numbers
        progress=progress, precision=PRECISION)
    claim_entries, claim_failures = _claims(exercise, code, progress, candidates)
    # several mistakes may fit one check: name the one that fits them all
    engine.agreeing_mistakes(judged.failures() + claim_failures)
    for found in claim_failures:
        found.entry["mistake"] = _mistake_json(found.mistake)
    checks = [_component_entry(name, check) for name, check in judged.drawn]
    checks += [_case_entry(case, size, verdict) for case, size, verdict in judged.fixed]
    return {"exercise": exercise.name, "checks": checks, "claims": claim_entries, "error": None}
