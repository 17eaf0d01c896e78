"""Every independent failure of a check, not only the first.

One failure per check hides the next: code with two defects shows the one that appears on
the smallest inputs, and a second (a loss that is right on small logits but capped on huge
ones) never shows. After a check's first failure is shrunk and diagnosed, this module sets
aside the examples that failure's cause explains and searches the rest: a failure found
there has another cause, and is reported with its own smallest example. One more cause per
check is looked for: an example where two causes act at once is explained by neither alone,
so a third search would find their sum, not a third cause.

What "explains" an example, for the check at hand, is decided on the first failure's own
smallest example, most specific first:
- the catalogued mistake the report names for it (settled with the other checks, or one
  that computes what the code computes on the first failure and on one more, then named):
  the example is explained when that mistake computes what the code computes there;
- a usual convention (``conventions``) under which the code agrees with the reference on the
  first example: explained where it agrees under that convention too;
- neither: the failure's kind (an error raised, a wrong shape, NaN or inf, no result, wrong
  values): explained when the code fails there in the same kind. This is the weakest test
  and only separates failures that look different: wrong values of unknown cause on two
  examples count as one cause (a missing factor is a constant factor on one example and
  not on another, and is still one mistake). Nothing was named, so a failure of another
  kind is reported as "another failure", never as "another cause".
An example an explanation cannot be computed on (the patched reference raises) counts as
explained: a second failure is claimed only where the first cause surely does not reach.

Code that passes a check never reaches this search, so a conform of correct code costs
nothing more; a failing check costs one more search (its draws, then the fixed corners).
"""
from __future__ import annotations

from . import conventions as known_conventions
from .compare import equal
from .diagnosis import matching_mistakes, message_of
from ..specs.example import Example
from .patching import patched
from .problem import same_error
from .report import CheckResult, Failure
from .search import search
from .subject import Subject

def other_causes(attempt, report):
    """``report`` (a failing one, as ``conform`` is about to return it) with the failures of
    another cause added; ``attempt``: the conform run that made it (its checker kept)."""
    checker = attempt.checkers.get(id(report))
    if checker is not None and not report.ok and not report.error:
        report.checks = with_other_causes(checker, report.checks, attempt.examples, attempt.seed)
    return report


def with_other_causes(checker, checks, examples, seed):
    """``checks`` with, right after each failing output or gradient check, a failing
    CheckResult "<check>: another cause" when a failure of another cause was found, with its
    own smallest example. One search serves every check of the component: the smallest
    example on which some failing check fails in a way its first cause does not explain."""
    failing = [c for c in checks if not c.skipped and c.failure is not None and
               c.failure.example is not None and c.name.startswith(("output", "gradient"))]
    if not failing:
        return checks
    for c in failing:                   # a mistake that explains the first failure and one more is named
        if c.failure.mistake is None:
            c.failure.matches = _matched_here(checker, c.name, c.failure.example)
            c.failure.mistake = c.failure.matches[0] if c.failure.matches else None
    causes = {c.name: _cause(checker, c.name, c.failure.example,
                             [c.failure.mistake] if c.failure.mistake is not None else [])
              for c in failing}

    def unexplained(example):
        found = _compared(checker, example)
        return {name: found[name] for name, cause in causes.items()
                if found.get(name) is not None and not cause.explains(example, found[name])}
    example = search(checker.strategy, lambda e: bool(unexplained(e)), examples, seed) or \
        next((e for e in checker.corners if unexplained(e)), None)
    if example is None:
        return checks
    others = {name: (example, found) for name, found in unexplained(example).items()}
    # a check the shared example does not reach: searched on its own, if an example already run
    # shows it has another cause too (so the search costs only where there is one)
    kept = checker.seen + checker.ran + checker.corners
    for name in causes:
        if name not in others and any(name in unexplained(e) for e in kept):
            def fails(e, name=name):
                return name in unexplained(e)
            own = search(checker.strategy, fails, examples, seed) or next(e for e in kept if fails(e))
            others[name] = (own, unexplained(own)[name])
    result = []
    for check in checks:
        result.append(check)
        if check.name in others:
            example, found = others[check.name]
            cause = causes[check.name]
            said = f"another cause: {cause.says} does not explain this example: " if cause.named else \
                f"it also fails another way ({kind_of(found)}, where the failure above gave {cause.says}): "
            failure = Failure(example, said + message_of(found),
                              diagnoses=[] if isinstance(found, str) else found["diagnoses"],
                              rel_error=None if isinstance(found, str) else found.get("rel_error"),
                              scaled_error=None if isinstance(found, str) else found.get("scaled_error"))
            result.append(CheckResult(f"{check.name}: " + ("another cause" if cause.named else "another failure"),
                                      check.kind, check.examples, failure))
    return result


def _compared(checker, example):
    """``checker.compare`` of the output and every gradient on ``example`` (its drawn
    properties left out: they are not what this search compares)."""
    kept = checker.properties
    checker.properties = []
    try:
        return checker.compare(example)
    finally:
        checker.properties = kept


def _matched_here(checker, name, example):
    """The catalogued mistakes that compute what the code computes on ``example`` and on one
    more failing example of those the engine kept: the first cause when no mistake matched
    every kept example (a second defect spoils those it reaches). One more example keeps a
    mistake that only coincides on a tiny example (uniform logits, say) from being taken."""
    def fails(e):
        return checker.compare(e, only=name).get(name) is not None
    others = [e for e in checker.seen + checker.ran if e is not example and fails(e)]
    if not others:
        return []
    found = matching_mistakes(checker, [example], outputs_only=name.startswith("output"))
    return [m for m in found if any(_agrees(checker, e, name, m) for e in others)]


# -- causes ------------------------------------------------------------------------------------
class _Cause:
    """What made a failure, as far as its smallest example tells: ``explains(example, found)``."""

    def __init__(self, says, explains, named=True):
        self.says, self._explains, self.named = says, explains, named

    def explains(self, example, found):
        try:
            return bool(self._explains(example, found))
        except Exception:              # noqa: BLE001 - not computable there: not claimed as another cause
            return True


def _cause(checker, name, example, mistakes):
    """The cause of check ``name``'s failure on ``example``: the mistakes that matched it, else
    the conventions the code agrees with there, else the failure's kind."""
    theirs = _values(checker.subject, example, name)
    if mistakes:
        return _Cause("the mistake named above, " + " or ".join(repr(m.name) for m in mistakes) + ",",
                      lambda e, _: any(_agrees(checker, e, name, m) for m in mistakes))
    fitting = [(said, variant) for said, variant in known_conventions.conventions_to_try(checker.component.name,
                                                                          checker.subject.untaken)
               if checker.variant is None and _same(theirs, _convention_values(checker, said, variant,
                                                                                example, name), checker)]
    if fitting:
        said = "the convention " + " or ".join(known_conventions.describe(s) for s, _ in fitting) + \
            " (the first failure agrees with it)"
        return _Cause(said, lambda e, _: any(_same(_values(checker.subject, e, name),
                                                   _convention_values(checker, s, v, e, name), checker)
                                             for s, v in fitting))
    kind = kind_of(checker.compare(example, only=name)[name])
    return _Cause(kind, lambda e, found: kind_of(found) == kind, named=False)


def kind_of(found):
    """What a failure looks like: "an error raised", "a wrong shape", "NaN or inf", "no result"
    or "wrong values"."""
    if isinstance(found, str):
        return "an error raised" if "raised" in found else "wrong values"
    if "expected_shape" in found:
        return "a wrong shape"
    message = found["message"]
    if message.startswith("NaN or inf"):
        return "NaN or inf"
    if message.startswith("no "):
        return "no result"
    return "wrong values"


def _values(subject, example, name):
    """(check ``name``'s value, the error raised) of ``subject`` on ``example``."""
    values, error = subject.result(example)
    return values.get(name), error if name not in values else None


def _same(a, b, checker):
    (value_a, error_a), (value_b, error_b) = a, b
    if error_a is not None or error_b is not None:
        return same_error(error_a, error_b)
    return value_a is not None and value_b is not None and equal(value_a, value_b, checker.tolerance())


def _agrees(checker, example, name, mistake):
    """True when the reference with ``mistake`` in place computes what the code computes."""
    with patched(mistake.patches()):
        wrong = _values(checker.reference, example, name)
    return _same(wrong, _values(checker.subject, example, name), checker)


def _convention_values(checker, said, variant, example, name):
    if variant is None:                          # an option the code lacks, given the convention's value
        moved = Example(example.names, example.args, {**example.options, **said})
        return _values(checker.reference, moved, name)
    return _values(Subject(checker.component, *variant(), name="npformer"), example, name)

