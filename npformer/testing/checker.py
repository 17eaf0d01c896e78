"""The checker behind ``conform`` and the grader: one implementation against npformer's
reference on drawn examples (output, every gradient, the properties), each failure shrunk
to its smallest example and compared with the catalogued mistakes.

``Checker(subject, rtol, atol, precision, variant)`` runs the checks; ``as_subject`` builds the
subject from conform's arguments; ``fixed_properties`` runs the properties on fixed numbers;
``compared_failures`` says which failures are compared with the catalogue.
"""
from __future__ import annotations

import math

import numpy as np

from . import components as catalogue
from . import mistakes, properties, protocol, strategies
from .compare import abs_tolerance, compare_tensor, data_scale, tolerance
from .diagnosis import matching_mistakes, message_of, smallest_failure
from .mistakes.registry import applicable
from ..specs import FACTORS
from ..specs.facts import precision as property_precision
from .report import CheckResult, Failure
from .scope import OutOfScope, Scope
from .search import explore
from .structure import candidates as structural, on_convention
from .subject import Subject, _same_value, describe_error

VACUOUS_WITHOUT = {"no_fully_masked": ("no readable key", "nothing readable")}   # property texts


def factors(component, example):
    """{name: value} of the constant factors a gradient of this component must not lose: its
    spec's (``spec.factors``), or 1/sqrt(D) for one whose queries are an input."""
    if component in FACTORS:
        return FACTORS[component](example)
    args = dict(zip(example.names, example.args))
    if "q" in args:
        return {"1/sqrt(D)": 1 / math.sqrt(args["q"].shape[-1])}
    return {}


class Checker:
    """Runs the implementation and the reference on examples; keeps what each check saw."""

    def __init__(self, subject, rtol=None, atol=None, precision=None, variant=None):
        self.subject, self.component = subject, subject.component
        self.reference = Subject.reference(subject.component) if variant is None else \
            Subject(subject.component, *variant, name="npformer")
        self.rtol, self.atol, self.precision, self.dtype = rtol, atol, precision, None
        self.properties = [p for p in properties.properties_of(self.component.name) if p.drawn and
                           (subject.differentiates or not p.needs_backward) and not self.vacuous(p)]
        self.variant = variant
        if variant is not None:       # npformer's properties state its own convention's facts
            self.properties = []
        self.results, self.seen, self.ran, self._matches = {}, [], [], []
        self.raised = False
        # a convention's reference is built on npformer's own functions where it can be: their
        # catalogued mistakes apply under it too (where it is not, they change nothing)
        functions = self.component.functions if variant is None else self.concept_functions()
        self.candidates, self.stale = applicable(mistakes.of_functions(functions))
        self.deferred = self.structural_candidates(functions, variant)
        scope = subject.scope or Scope()
        corners = (scope.fit(self.component.name, scope.pin(c))
                   for c in strategies.corner_examples(self.component.name))
        self.corners = [c for c in corners if subject.can_run(c)]
        draw = self.component.draw.map(scope.pin) if scope.pinned else self.component.draw
        self.strategy = draw.filter(subject.can_run) if subject.untaken or scope.lacks else draw

    def structural_candidates(self, functions, variant):
        """The structural changes (``structure``) to try: of npformer's own backwards, and under a
        convention with a backward of its own, of that backward too (patching npformer's reaches
        only a convention built on them), named after the component's backward."""
        if variant is None or variant[1] is None:
            return structural(functions)
        own = [f for f in self.component.functions if f.endswith("backward")][:1]
        return [c for path in own for c in on_convention(path, variant[1])] + structural(functions)

    def concept_functions(self):
        """The functions of every component of this one's concept: what a convention's reference
        may run instead of the component's own (tanh GELU for GELU)."""
        found = [f for c in catalogue.COMPONENTS.values() if c.concept == self.component.concept
                 for f in c.functions]
        return tuple(dict.fromkeys(self.component.functions + tuple(found)))

    def vacuous(self, prop):
        """True when the implementation takes none of the options the property is about (an
        option its scope pins to a value other than npformer's default counts as taken: code
        declared always causal is checked for causality), or lacks the capability it is about."""
        pinned = self.subject.scope.pinned if self.subject.scope else {}
        defaults = self.component.option_defaults()
        untaken = [o for o in prop.needs_any if o in self.subject.untaken and
                   (o not in pinned or _same_value(pinned[o], defaults.get(o)))]
        return bool(prop.needs_any) and len(untaken) == len(prop.needs_any) or bool(self._lacked(prop))

    def _lacked(self, prop):
        lacks = self.subject.scope.lacks if self.subject.scope else ()
        return next((w for w in lacks for text in VACUOUS_WITHOUT.get(w, ()) if text in prop.text), None)

    def vacuous_checks(self):
        """A skipped CheckResult for each property the implementation's options leave empty."""
        return [CheckResult(p.text, "property", skipped=f"{self.subject.name} lacks {self._lacked(p)}"
                            if self._lacked(p) else f"{self.subject.name} takes no {' or '.join(p.needs_any)}")
                for p in properties.properties_of(self.component.name) if self.vacuous(p)
                and (self.subject.differentiates or not p.needs_backward)]

    def factors(self, example):
        """{name: value} of the constant factors a gradient must not lose on ``example``."""
        return factors(self.component.name, example)

    def precision_name(self):
        """The precision the code is judged at: given, else its output's dtype."""
        return self.precision or self.dtype or "float64"

    def tolerance(self):
        """The relative tolerance: given, or the one of the code's precision."""
        return self.rtol if self.rtol is not None else tolerance(self.precision_name())

    def abs_tolerance(self):
        """The absolute tolerance near zero: given, or the one of the code's precision."""
        return self.atol if self.atol is not None else abs_tolerance(self.precision_name())

    def _dtype_of(self, example):
        if self.dtype is None and self.precision is None:    # a precision given is the judge's choice
            try:
                out = self.subject.output(example.args, example.options)
                first = out[0] if isinstance(out, tuple) else out
                self.dtype = str(getattr(first, "dtype", "float64"))
            except Exception:               # noqa: BLE001 - the comparison will say what failed
                self.dtype = "float64"

    def compare(self, example, only=None):
        """{check name: failure message or None} on one example (``only``: that check alone)."""
        self._dtype_of(example)
        if only == protocol.RULE:
            self.subject.outcome(example)
            return {only: self.subject.protocol}
        if only is not None and not only.startswith(("output", "gradient")):
            prop = next(p for p in self.properties if p.text == only)
            return {only: self._property(prop, example)}
        mine, error = self.subject.outcome(example)
        self.raised = error is not None
        right = self.reference_outcome(example)
        rounding = self.float32_rounding(example) if self.precision_name() != "float64" else {}
        scale = data_scale(list(example.args) + list(example.options.values()))   # for tensors near 0
        found = {}
        for name, expected in right.items():
            if only is not None and name != only:
                continue
            if error and name not in mine:          # the output stands when only the backward raised
                found[name] = f"your implementation raised {error}"
                continue
            others = {n: np.shape(v) for n, v in right.items() if n != name and isinstance(v, np.ndarray)}
            mismatch = compare_tensor(name, mine.get(name), expected, factors(self.component.name, example),
                                      self.tolerance(), max(self.abs_tolerance(), rounding.get(name, 0.0)), scale,
                                      others)
            found[name] = None if mismatch is None else mismatch
        if only is None and self.subject.differentiates and error is None:
            found[protocol.RULE] = self.subject.protocol
        for prop in self.properties if only is None else ():
            found[prop.text] = self._property(prop, example)
        return found

    def float32_rounding(self, example):
        """{check: 4 x how far the reference itself moves when run in float32 on ``example``}:
        the absolute error a correct float32 computation may have there (a cancellation near 0
        loses more than float32's relative tolerance says)."""
        def single(value):
            return value.astype(np.float32) if isinstance(value, np.ndarray) and value.dtype == np.float64 \
                else value
        from ..specs.example import Example
        low = Example(example.names, tuple(map(single, example.args)), example.options)
        try:
            at32, error = self.reference.outcome(low)
            at64 = self.reference_outcome(example)
        except RuntimeError:
            return {}
        if error is not None:
            return {}
        return {name: 4 * float(np.nanmax(np.abs(at32[name] - value), initial=0.0))
                for name, value in at64.items() if name in at32 and np.shape(at32[name]) == np.shape(value)}

    def _property(self, prop, example):
        try:
            with np.errstate(all="ignore"), property_precision(self.tolerance()):  # NaN is a result
                prop.check(self.subject, example.fresh())
            return None
        except OutOfScope as outside:
            return outside
        except properties.PropertyFailed as failure:
            return str(failure)
        except Exception as error:         # noqa: BLE001 - the implementation's own error
            return f"your implementation raised {describe_error(error)}"

    def matches(self, example, outputs_only):
        """``matching_mistakes`` on ``example``, the first examples seen and two on which the
        code under test computed wrong numbers without raising (two mistakes may raise the same
        error), remembered; pairs of mistakes in one function when no single one matches."""
        for seen, only, found in self._matches:
            if seen is example and only == outputs_only:
                return found
        found = matching_mistakes(self, [example] + self.seen + self.ran, outputs_only, two=True)
        self._matches.append((example, outputs_only, found))     # the example is kept alive with it
        return found

    def structural_matches(self, example, outputs_only):
        """``matches`` among the structural candidates (``structure``), asked only when the
        catalogue leaves a failure unexplained."""
        return matching_mistakes(self, [example] + self.seen + self.ran, outputs_only,
                                 candidates=self.deferred)

    def reference_outcome(self, example):
        """The reference's results on ``example``: what the implementation is compared on
        (the output alone when it has no backward)."""
        right, error = self.reference.outcome(example)
        if error is not None:           # a check the reference cannot make is no pass
            raise RuntimeError(f"the reference ({self.reference.name}) raised {error}")
        if not self.subject.differentiates:
            right = {name: value for name, value in right.items() if name.startswith("output")}
        return right

    def record(self, example):
        """``compare`` and remember: how often each check ran, its first failure, and the
        first few examples."""
        found = self.compare(example)
        if len(self.seen) < 4:
            self.seen.append(example)
        elif not self.raised and len(self.ran) < 2 and any(f is not None for f in found.values()):
            self.ran.append(example)               # wrong numbers, not an error: they tell mistakes apart
        for name, failure in found.items():
            kind = "output" if name.startswith("output") else "gradient" if name.startswith("gradient") \
                else "property"
            check = self.results.setdefault(name, CheckResult(name, kind))
            if isinstance(failure, OutOfScope):
                check.skipped = check.skipped or f"not run: it {failure}"
                continue
            check.examples += 1
            if failure is not None and check.failure is None:
                check.failure = Failure(None, message_of(failure))

    def run(self, examples, seed):
        """[CheckResult]: every check on ``examples`` drawn inputs (and the corners), each failure
        shrunk to a small example and diagnosed, then the fixed-number properties. A failing
        check reuses an example already shrunk for another when it fails there too (one wrong
        line usually breaks the output and every gradient at once). A component's own strategy
        (no scope, no filter) is drawn once per process, then replayed."""
        own = self.strategy is self.component.draw and self.subject.scope is None
        explore(self.strategy, self.record, examples, seed, self.corners, replay=own)
        shrunk = []
        for check in self.results.values():
            if check.skipped:
                check.failure = None
            elif check.failure is not None:
                check.failure = smallest_failure(self, check.name, examples, seed, shrunk)
        if self.variant is not None:
            return list(self.results.values()) + [
                CheckResult(p.text, "property", skipped="not run: a fact of npformer's convention")
                for p in properties.properties_of(self.component.name)]
        return list(self.results.values()) + fixed_properties(self.subject, self.tolerance()) + \
            self.vacuous_checks()



def compared_failures(checks):
    """The failures of one component's checks that were compared with the catalogue, for
    ``mistakes.agreeing_mistakes``: the outputs alone when one failed (a wrong output makes every gradient
    differ, and autograd's gradients of a wrong forward are no catalogued backward's)."""
    failed = [c for c in checks if c.failure is not None and c.kind != "property"]
    outputs = [c for c in failed if c.kind == "output"]
    return [c.failure for c in outputs or failed]


def as_subject(component, forward, backward=None, vjp=None, scope=None):
    """A ``Subject`` from conform's arguments (an adapter brings its own forward and vjp)."""
    name = getattr(forward, "__name__", None)
    signature_of = forward
    if hasattr(forward, "vjp") and hasattr(forward, "forward"):          # from_torch, from_jax
        forward, vjp, name, signature_of = forward.forward, forward.vjp, forward.name, forward.fn
    component = catalogue.component_named(component)
    if component.adapt is not None:                 # a decoding step, say: looped over the positions
        forward = component.adapt(forward)
    return Subject(component, forward, backward, vjp, name=name, signature_of=signature_of, scope=scope)


def fixed_properties(subject, tol=None):
    """The component's properties on fixed numbers, each run once (judged at ``tol``, by default
    float64's; one that needs an option value or a capability the code lacks is not run)."""
    tol = tolerance() if tol is None else tol
    results = []
    for prop in properties.properties_of(subject.component.name):
        if prop.drawn or (prop.needs_backward and not subject.differentiates):
            continue
        check = CheckResult(prop.text, "property", examples=1)
        try:
            with np.errstate(all="ignore"), property_precision(tol):
                prop.check(subject, None)
        except OutOfScope as outside:
            check.skipped, check.examples = f"not run: it {outside}", 0
        except properties.PropertyFailed as failure:
            check.failure = Failure(None, str(failure))
        except Exception as error:         # noqa: BLE001 - the implementation's own error
            check.failure = Failure(None, f"your implementation raised {describe_error(error)}")
        results.append(check)
    return results
