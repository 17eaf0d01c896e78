"""What a failing check is: its smallest example, and the catalogued mistakes (one, or two in
one function) that compute exactly what the implementation computed there.

``same`` and ``matching`` are the engine's one test of "these two results are the same" and
its one mistake matcher: conform's drawn examples (``matching_mistakes``) and the grader's
fixed cases (``judge``) both use them."""
from __future__ import annotations

from . import mistakes
from .compare import equal, ratio_diagnosis
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
    failure = Failure(example, message_of(found), diagnoses=[] if isinstance(found, str) else
                      factor_checked(checker, name, example, found),
                      rel_error=None if isinstance(found, str) else found.get("rel_error"),
                      scaled_error=None if isinstance(found, str) else found.get("scaled_error"))
    if not name.startswith(("output", "gradient")):
        return failure
    # one mistake, else two wrong lines in one function (each one's hint)
    outputs_only = name.startswith("output")
    failure.matches = checker.matches(example, outputs_only=outputs_only)
    failure.mistake = failure.matches[0] if failure.matches else None
    if getattr(checker, "deferred", None):
        failure.deferred = lambda: checker.structural_matches(example, outputs_only)
    return failure                    # its generic diagnoses are shown only if no mistake is named


def factor_checked(checker, name, example, found):
    """``found``'s diagnoses, a constant factor claimed only when it holds on the other
    failing examples the checker kept too (a tiny example can make a tensor a multiple of
    the right one by its shape alone: 1.009 times here, 3.711 times there is no factor)."""
    diagnoses, c = list(found["diagnoses"]), found.get("ratio")
    if c is None or abs(c - 1) <= 1e-3:
        return diagnoses
    claims = [d for d in diagnoses if " times the right " in d or d.startswith("a sign flip")]
    ratios = []
    for other in checker.seen + checker.ran:
        seen = checker.compare(other, only=name).get(name) if other is not example else None
        if isinstance(seen, dict) and "rel_error" in seen:
            ratios.append(seen.get("ratio"))
    if not ratios:
        return diagnoses
    if all(r is not None and abs(r - c) <= 1e-6 * max(1.0, abs(c)) for r in ratios):
        what = "output" if name.startswith("output") else "gradient"
        return diagnoses if claims else [ratio_diagnosis(c, checker.factors(example), what)] + diagnoses
    return [d for d in diagnoses if d not in claims]


def same(a, b, tol=None):
    """True when two results are the same: each a ({check name: array}, error) pair, with the
    same error (one type, one message), or no error and the same names holding equal arrays
    (``compare.equal`` to ``tol``, by default float64's). The one test of sameness for conform
    and the fixed cases."""
    (values_a, error_a), (values_b, error_b) = a, b
    if error_a is not None or error_b is not None:
        return same_error(error_a, error_b)
    return bool(values_a) and set(values_a) == set(values_b) and \
        all(equal(x, values_b[name], tol) for name, x in values_a.items())


def matching(candidates, compute, theirs, right=None, tol=None, two=False):
    """The catalogued mistakes that compute what the code under test computed, in the order of
    ``candidates`` (Mistakes, or (mistake, its patches)). ``compute(patches)``: the results with
    those patches in place, [(values, error)] like ``theirs``; a mistake matches when every one
    is ``same`` as the code's, and (given ``right``, the reference's) one differs from the right
    one. A stale edit is not what the code computes. ``two``: when no single mistake matches,
    pairs of mistakes made in one function (``mistakes.pairs``), for two wrong lines at once.
    The one mistake matcher of conform and the fixed cases."""
    found = []
    for entry in candidates:
        candidate, patches = entry if isinstance(entry, tuple) else (entry, None)
        try:
            patches = patches if patches is not None else candidate.patches()
        except ValueError:
            continue
        wrong = compute(patches)
        if all(same(w, t, tol) for w, t in zip(wrong, theirs)) and \
                (right is None or not all(same(w, r, 1e-12) for w, r in zip(wrong, right))):
            found.append(candidate)
    if found or not two:
        return found
    both = mistakes.pairs(candidates)
    return matching(both, compute, theirs, right, tol) if both else []


def matching_mistakes(checker, examples, outputs_only=False, two=False, candidates=None):
    """``matching`` on drawn ``examples``: the catalogued mistakes (``checker.candidates``) that
    compute exactly what the implementation computed on every one of them (and differ from the
    reference on one). ``outputs_only``: compare the outputs alone (a wrong output is a
    forward's mistake, whatever the backward beside it does)."""
    outputs_only = outputs_only or not checker.subject.differentiates

    def results(subject):
        found = [subject.result(e) for e in examples]
        if not outputs_only:
            return found
        outputs = [{k: v for k, v in values.items() if k.startswith("output")} for values, _ in found]
        # an error raised after the output was computed (in the backward) is no output's mistake
        return [(kept, None if kept else error) for kept, (_, error) in zip(outputs, found)]

    def compute(patches):
        if callable(patches):           # the reference rebuilt, its own backward changed
            return results(patches(checker.reference))
        with patched(patches):
            return results(checker.reference)
    return matching(checker.candidates if candidates is None else candidates, compute, results(checker.subject),
                    results(checker.reference), checker.tolerance(), two)
