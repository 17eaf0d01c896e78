"""Judging one exercise with ``npformer.testing``: the learner's functions patched in, alone.

Three kinds of check, all with npformer's own code everywhere but the exercise's functions:
the exercise's components on drawn inputs (output, every gradient, the properties, the
smallest failing example and the catalogued mistake) and its gradient-check cases at fixed
sizes (every gradient, ``.grad`` accumulation, the mistake or a generic diagnosis), both
through the engine's one entry (``npformer.testing.engine``), and the claims about whole
models (``claims``), the grader's own.
"""
from __future__ import annotations

import os

import numpy as np

from ..testing import engine
from ..testing.engine import Subject, describe_error, patched, same_error
from . import claims

EXAMPLES = 40                    # drawn inputs per component (and per search for a failing one)
EXAMPLES_VARIABLE = "NPFORMER_GRADE_EXAMPLES"    # the teacher's number instead, read at each grading
SEED = 0
EXTRA_SEEDS = (101, 202)         # exercises judged on fixed cases alone: each case again, other numbers


def examples():
    """Drawn inputs per component: ``NPFORMER_GRADE_EXAMPLES`` when set, else ``EXAMPLES``."""
    return int(os.environ.get(EXAMPLES_VARIABLE) or EXAMPLES)


class PatchedSubject(Subject):
    """npformer's reference of a component, run with the learner's functions patched in."""

    def __init__(self, component, patches):
        forward, backward = engine.component(component).reference_pair()
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


def _subject(name, patches):
    """The subject of component ``name``: patches that compute in the learner's process bring
    their own (``remote.Learner``), else npformer's reference with ``patches`` in place."""
    return patches.subject(name) if hasattr(patches, "subject") else PatchedSubject(name, patches)


def judge_component(name, patches, candidates):
    """[CheckResult] of one component on drawn inputs, each failure at its smallest example."""
    judged = engine.judge_functions(lambda n: _subject(n, patches), patches, components=[name],
                                    mistakes=candidates, examples=examples(), seed=SEED)
    return [check for _, check in judged.drawn]


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
        "error": describe_error(error) if error is not None else None}


def run_claim(check, patches):
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
        self.matches = [m for m, wrong in candidates if self._same(run_claim(check, wrong), error)]
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
        progress(text)
        ok, detail, error = run_claim(check, patches)
        entry = {"claim": text, "ok": ok, "detail": detail}
        if not ok:
            failures.append(_ClaimFailure(entry, check, error, candidates))
        entries.append(entry)
    return entries, failures


def judge_exercise(exercise, patches, progress=None):
    """{"exercise", "checks": [...], "claims": [...]} of one exercise with ``patches`` in place
    (the training task's: every component the learner wrote); ``progress(text)`` hears each
    stage as it begins."""
    progress = progress or (lambda text: None)
    candidates = engine.candidates(exercise.paths(forward=True))
    judged = engine.judge_functions(
        lambda name: _subject(name, patches), patches, exercise.components, exercise.checks,
        candidates, examples(), SEED, extra_seeds=EXTRA_SEEDS if not exercise.components else (),
        progress=progress)     # without drawn inputs, more numbers per case
    claim_entries, claim_failures = _claims(exercise, patches, progress, candidates)
    # several mistakes may fit one check: name the one that fits them all
    engine.settle(judged.failures() + claim_failures)
    for found in claim_failures:
        found.entry["mistake"] = _mistake_json(found.mistake)
    checks = [_component_entry(name, check) for name, check in judged.drawn]
    checks += [_case_entry(case, size, verdict) for case, size, verdict in judged.fixed]
    return {"exercise": exercise.name, "checks": checks, "claims": claim_entries, "error": None}
