"""``conform``: check someone's implementation of a component against npformer's reference.

It draws inputs with hypothesis (``strategies``), runs the implementation and npformer's
plain-track reference in float64 on each, compares the output and every gradient, and checks
the component's properties on the implementation's own results. A failing check is searched
again until hypothesis has shrunk it to its smallest example, which is run through the
catalogued mistakes (``mistakes``): one that computes exactly what the implementation did is named.
"""
from __future__ import annotations

import warnings

from .needs import require_hypothesis

require_hypothesis("npformer.testing.conform")     # one line naming the extra, before hypothesis is imported

import numpy as np

from . import components as catalogue
from . import conventions as known_conventions
from . import strategies
from . import mistakes
from .adapters import Adapted
from .checker import Checker, as_subject, compared_failures, fixed_properties  # noqa: F401 - the engine's
from .compare import TOLERANCES, compare_tensor  # noqa: F401 - one table of tolerances for every check
from .diagnosis import matching_mistakes
from .independent import other_causes
from .mistakes.registry import stale_warning
from .report import CheckResult, ConformanceReport
from .scope import Scope
from .subject import UsageError

FOLLOWED_UNNAMED = 2            # conventions the forward follows tried after the first, while none names the slip

AT_FLOAT32 = "judged at float32's tolerance, properties included"


def conform(component, forward, backward=None, *, vjp=None, examples=100, seed=0, rtol=None,
            atol=None, scope=None, precision=None, convention=None):
    """Check ``forward`` (and ``backward`` or ``vjp``) against npformer's ``component``.

    ``component``: a name of ``npformer.testing.COMPONENTS`` ("softmax", "attention",
    "grouped_attention", "layernorm", "cross_entropy" ...); each documents its signature.
    ``forward`` may also be an adapter such as ``from_torch(fn)``, which brings its own vjp.
    ``examples``: inputs drawn per search; ``seed``: the hypothesis seed (same seed, same
    examples).
    ``scope``: what the code supports (``npformer.testing.scope``): options it always uses
    and capabilities it lacks, as a dict or "causal=True,no_gqa,even_head_width".
    ``precision``: the precision the code computes in ("float32"); by default its output's
    dtype, and code that fails in float64 only by float32 rounding is judged at float32.
    ``convention``: the convention the code follows ({"layout": "interleaved"}); by default
    the usual ones (``conventions``) are tried before a mistake is blamed.
    ``rtol``, ``atol``: the relative and near-zero tolerances (default: the precision's).
    Returns a ``ConformanceReport``: ``verdict`` ("conforms", "conforms under convention",
    "does not conform"), ``ok`` (True for the first two), each check, and for a failure its
    smallest example, the worst element, and the catalogued mistake it matches when one does.
    """
    found = catalogue.component_named(component)
    scope = Scope.parse(scope, found)
    if precision is not None and precision not in TOLERANCES:
        raise ValueError(f"precision: expected one of {', '.join(TOLERANCES)}, got {precision!r}")
    _callable(forward, backward, vjp, found)
    run = _Attempt(found, forward, backward, vjp, scope, examples, seed, rtol, atol)
    run.try_once()
    given = known_conventions.convention_given(found.name, convention) if convention is not None else ()
    report = run(precision, *given)
    if report.ok or report.error:
        return report
    # code that returns float64 numbers may compute in float32 inside: judged at float32 when
    # it fails only by rounding (never with rtol= given); code whose numbers are float32 ones
    # is judged at float32 first, other code under the usual conventions first (exact there)
    lower = precision is None and rtol is None and report.dtype == "float64"
    single = lower and _float32_results(run.checkers[id(report)])
    if single or given:
        report, precision = _at_float32(run, report, given, lower, precision)
        if report.ok or given:
            return report if report.ok else other_causes(run, report)
    conventions = known_conventions.conventions_to_try(found.name, run.untaken)
    for said, variant in conventions:
        under = run.under(report, said, variant, precision)
        if under is not None:
            return under
    if lower and precision is None and not _named(report):    # a mistake that explains it is no rounding
        report, precision = _at_float32(run, report, given, lower, precision)
        for said, variant in conventions if not report.ok and precision is None else ():
            under = run.under(report, said, variant, "float32", rounding=True)
            if under is not None:
                return under
    if report.ok:
        return report
    # no convention explains everything: one the forward follows is the code's, and what differs
    # under it is the slip (a catalogued mistake of npformer's function still applies there)
    followed = run.forward_follows(report, conventions, precision)
    return other_causes(run, followed if followed is not None else report)


def _callable(forward, backward, vjp, component):
    """UsageError at once, saying what to pass, unless the functions are functions."""
    for name, given in (("forward", forward), ("backward", backward), ("vjp", vjp)):
        if given is None and name != "forward":
            continue
        if not (callable(given) or (name == "forward" and isinstance(given, Adapted))):
            what = f"the text {given!r}" if isinstance(given, str) else type(given).__name__
            raise UsageError(f"{name}: expected a function (or an adapter such as from_torch(fn)), got {what}: "
                             f"pass the function itself, as in conform({component.name!r}, my_forward, "
                             f"my_backward) with {component.signature}")


def _at_float32(run, report, given, lower, precision):
    """(report, precision): the float32 run when the code agrees at float32 or computes in
    float32 with a mistake (its rounding then no failure), else ``report`` as it was."""
    single = _float32_results(run.checkers[id(report)])
    if not (lower and (single or _rounding_only(report))):
        return report, precision
    at32 = run("float32", *given)
    if at32.ok:
        at32.notes.append(f"agrees to float32 precision ({_why(single)}): {AT_FLOAT32}")
        return at32, "float32"
    if single and len(at32.failures) < len(report.failures):      # float32 code with a mistake
        at32.notes.append(f"your code computes in float32: {AT_FLOAT32}")
        return at32, "float32"
    return report, precision


def _why(single):
    return "your code computes in float32" if single else \
        "within float32 rounding, though your results are not float32 numbers"


def _float32_results(checker):
    """True when every number the code returned on the first examples is a float32 number."""
    values = [v for e in checker.seen for v in checker.subject.outcome(e)[0].values() if v is not None]
    finite = [np.asarray(v, np.float64)[np.isfinite(v)] for v in values]
    return bool(finite) and all(np.array_equal(f.astype(np.float32).astype(np.float64), f) for f in finite)


def _rounding_only(report):
    """True when every failing output and gradient is within float32 rounding (then float32
    decides): off by less than 1e-2 of its tensor, or of the example's scale for a tensor far
    below it (one gradient entry of 1e-9 where 1e-18 is expected is rounding, not a mistake)."""
    compared = [c.failure for c in report.failures if c.kind != "property"]
    return bool(compared) and all(_off(f) is not None and _off(f) < 1e-2 for f in compared)


def _off(failure):
    return failure.scaled_error if failure.scaled_error is not None else failure.rel_error


def _named(report):
    """True when every failing output and gradient of ``report`` names a catalogued mistake."""
    compared = [c for c in report.failures if c.kind != "property"]
    return bool(compared) and all(c.failure.mistake is not None for c in compared)


class _Attempt:
    """One conform run under a precision and a convention: ``attempt(precision, said, variant)``."""

    def __init__(self, component, forward, backward, vjp, scope, examples, seed, rtol, atol):
        self.component, self.scope = component, scope
        self.functions = (forward, backward, vjp)
        self.examples, self.seed, self.rtol, self.atol = examples, seed, rtol, atol
        self.untaken = as_subject(component.name, *self.functions).untaken
        self.checkers = {}

    def try_once(self):
        """Call the forward on one corner input: a forward that answers in another shape than
        its signature says (its cache returned without a backward) is refused at once."""
        subject = as_subject(self.component.name, *self.functions, scope=self.scope)
        corner = next((c for c in strategies.corner_examples(self.component.name) if subject.can_run(c)), None)
        if corner is None:
            return
        try:
            subject.output(corner.fresh().args, corner.options)
        except UsageError:
            raise
        except Exception:               # noqa: BLE001 - any other error is a check's finding
            return

    def checker(self, precision, said=None, variant=None):
        scope = self.scope
        options = {k: v for k, v in (said or {}).items() if k in known_conventions.options(self.component.name)}
        if options:                                   # an option convention: the reference's own option
            scope = Scope({**scope.pinned, **options}, scope.lacks)
        subject = as_subject(self.component.name, *self.functions, scope=scope)
        return Checker(subject, self.rtol, self.atol, precision, variant() if variant else None)

    def screen(self, report, said, variant, precision):
        """True when the code agrees with the reference under the convention on the examples
        the first run failed on (a cheap look before a whole run)."""
        checker = self.checker(precision, said, variant)
        scope = checker.subject.scope or Scope()
        # an error the code raises is its own: no convention changes it, and it stops no look
        wrong = [c for c in report.failures if c.kind != "property" and c.failure.example is not None
                 and not c.failure.message.startswith("your implementation raised")]
        names = {c.name for c in wrong}
        failed = [e for e in (scope.pin(c.failure.example) for c in wrong) if checker.subject.can_run(e)]
        return all(v is None for e in failed for k, v in checker.compare(e).items()
                   if k in names) if failed else bool(report.failures)

    def under(self, report, said, variant, precision, rounding=False):
        """The report under a convention when the code agrees with the convention on the
        examples ``report`` failed on and that whole run conforms, else None.
        ``rounding``: the run is at float32 for code that returns float64 numbers."""
        try:
            if self.screen(report, said, variant, precision):
                under = self(precision, said, variant)
                if under.ok:
                    if rounding:
                        single = _float32_results(self.checkers[id(under)])
                        under.notes.append(f"agrees to float32 precision ({_why(single)}): {AT_FLOAT32}")
                    return under
        except RuntimeError:                  # the convention does not apply to these inputs
            return None
        return None

    def forward_follows(self, report, conventions, precision):
        """The report under the first convention the code's forward follows, or None: one whose
        reference computes what the code computes on every example ``report``'s outputs failed
        on (what still differs under it is no convention), or an option convention (RoPE's
        layout) under which a catalogued mistake does (the code follows it, and makes that
        mistake: named when it explains every failure there). None when no output failed."""
        failed = [c.failure.example for c in report.failures if c.kind == "output" and c.failure.example is not None
                  and not c.failure.message.startswith("your implementation raised")]   # an error is no convention's
        if not failed:
            return None
        first, tried = None, 0
        for said, variant in conventions:
            if tried > FOLLOWED_UNNAMED:
                break
            checker = self.checker(precision, said, variant)
            scope = checker.subject.scope or Scope()
            examples = [e for e in (scope.pin(e) for e in failed) if checker.subject.can_run(e)]
            try:
                if examples and all(v is None for e in examples for k, v in checker.compare(e).items()
                                    if k.startswith("output")):
                    under = self(precision, said, variant)
                    if not any(c.kind == "output" for c in under.failures):
                        under.notes.append("your forward agrees under this convention; what differs is not one")
                        if _named(under):
                            return under
                        # two conventions can agree on every forward example (a finite fill and a
                        # fully masked row's mean): the one whose backward names the slip is the code's
                        first, tried = first or under, tried + 1
                elif variant is None and examples and not _named(report) and \
                        matching_mistakes(checker, examples[:1], outputs_only=True):    # an option's: cheap
                    under = self(precision, said, variant)
                    if _named(under):
                        return under
            except RuntimeError:
                continue
        return first

    def __call__(self, precision=None, said=None, variant=None):
        checker = self.checker(precision, said, variant)
        subject = checker.subject
        report = ConformanceReport(subject.component.name, subject.name, self.examples, self.seed, 0.0,
                                   "float64", convention=dict(said or {}))
        if subject.untaken:
            own = {k: v for k, v in subject.untaken.items() if k not in (subject.scope.pinned if
                                                                          subject.scope else {})}
            if own:
                taken = ", ".join(f"{k}={v!r}" for k, v in own.items())
                report.notes.append(f"{subject.name} takes no {', '.join(own)}: checked only on "
                                    f"examples with {taken}")
        if self.scope:
            report.scope = self.scope.describe()
            report.notes.append(f"scope: checked only with {report.scope}")
        if said:
            report.notes.append(f"convention: {known_conventions.describe(said)} (the reference was run under it)")
        report.warnings = stale_warning(checker.stale)
        for text in report.warnings:
            warnings.warn(text, stacklevel=3)
        report.checks = checker.run(self.examples, self.seed)
        report.tolerance, report.dtype = checker.tolerance(), checker.precision_name()
        mistakes.agreeing_mistakes(compared_failures(report.checks))
        self.checkers[id(report)] = checker           # for other_causes, once a report is chosen
        if not subject.differentiates and not subject.component.forward_only:
            report.checks.append(CheckResult("gradients", "gradient", skipped="no backward or vjp given"))
        return report


