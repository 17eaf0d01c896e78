"""What a failing check is: its smallest example, and the catalogued mistakes (one, or two in
one function) that compute exactly what the implementation computed there."""
from __future__ import annotations

from . import mistakes
from .compare import equal
from .patching import patched
from .problem import same_error
from .report import Failure
from .search import search


def message_of(found):
    """The text of a check's finding (a string, or a comparison's dict)."""
    return found if isinstance(found, str) else found["message"]


def smallest_failure(checker, name, examples, seed, shrunk=None):
    """The check ``name``'s failure on the smallest example hypothesis finds, diagnosed.
    ``shrunk``: examples already shrunk for other checks, tried first (and added to)."""
    def fails(example):
        return checker.compare(example, only=name).get(name) is not None
    shrunk = [] if shrunk is None else shrunk
    example = next((e for e in shrunk if fails(e)), None)
    # hypothesis's own search first, for an example it can shrink; the corners if it finds none
    example = example or search(checker.strategy, fails, examples, seed) or \
        search(checker.strategy, fails, examples, seed, checker.corners)
    if example is None:                                   # flaky: keep what the first search saw
        return checker.results[name].failure
    if not any(e is example for e in shrunk):
        shrunk.append(example)
    found = checker.compare(example, only=name)[name]
    failure = Failure(example, message_of(found), diagnoses=[] if isinstance(found, str) else found["diagnoses"],
                      rel_error=None if isinstance(found, str) else found.get("rel_error"))
    if not name.startswith(("output", "gradient")):
        return failure
    failure.matches = checker.matches(example, outputs_only=name.startswith("output"))
    if not failure.matches:                # two wrong lines in one function: each one's hint
        failure.matches = matching_pairs(checker, example, outputs_only=name.startswith("output"))
    failure.mistake = failure.matches[0] if failure.matches else None
    return failure                    # its generic diagnoses are shown only if no mistake is named


def matching_mistakes(checker, examples, outputs_only=False):
    """The catalogued mistakes that compute exactly what the implementation computed on every
    one of ``examples`` (and differ from the reference on one), in catalogue order; raising
    the same error on an example counts as computing the same. ``outputs_only``: compare the
    outputs alone (a wrong output is a forward's mistake, whatever the backward beside it does)."""
    tol = checker.tolerance()
    outputs_only = outputs_only or not checker.subject.differentiates

    def results(subject):
        found = [subject.result(e) for e in examples]
        if not outputs_only:
            return found
        outputs = [{k: v for k, v in values.items() if k.startswith("output")} for values, _ in found]
        # an error raised after the output was computed (in the backward) is no output's mistake
        return [(kept, None if kept else error) for kept, (_, error) in zip(outputs, found)]
    theirs = results(checker.subject)
    right = results(checker.reference)
    found = []
    for entry in checker.candidates:      # (mistake, patches), or a mistake the grader chose
        candidate, patches = entry if isinstance(entry, tuple) else (entry, None)
        try:
            patches = patches if patches is not None else candidate.patches()
        except ValueError:                # a stale edit: not what this code computes
            continue
        with patched(patches):
            wrong = results(checker.reference)
        if all(_same_result(w, t, tol) for w, t in zip(wrong, theirs)) and \
                not all(_same_result(w, r, 1e-12) for w, r in zip(wrong, right)):
            found.append(candidate)
    return found


def matching_pairs(checker, example, outputs_only):
    """``matching_mistakes`` over pairs of the candidates made in one function (``mistakes.pairs``)."""
    kept = checker.candidates
    try:
        checker.candidates = mistakes.pairs(kept)
        return matching_mistakes(checker, [example] + checker.seen + checker.ran, outputs_only) \
            if checker.candidates else []
    finally:
        checker.candidates = kept


def _same_result(a, b, tol):
    (values_a, error_a), (values_b, error_b) = a, b
    if error_a is not None or error_b is not None:
        return same_error(error_a, error_b)
    return _same(values_a, values_b, tol)


def _same(a, b, tol):
    """True when two outcomes hold the same names and equal arrays (``compare.equal``)."""
    return bool(a) and set(a) == set(b) and all(equal(x, b[name], tol) for name, x in a.items())
