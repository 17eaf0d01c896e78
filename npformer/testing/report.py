"""What ``conform`` found: each check, and for a failure the smallest example and the mistake."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

WIDTH = 100


class ConformanceError(AssertionError):
    """Raised by ``ConformanceReport.raise_if_failed``; its message is the whole report."""


@dataclass
class Failure:
    """A check that failed: on which (smallest) example, what differs, and why if known."""

    example: object                      # strategies.Example (None for a fixed-number property)
    message: str                         # "worst at (0, 1): yours 0.25, expected 0.5 (relative error 5.0e-01)"
    mistake: object = None               # the catalogued Mistake it matches, if one does
    matches: list = field(default_factory=list)     # every catalogued Mistake that fits this check
    diagnoses: list = field(default_factory=list)   # generic diagnoses when no mistake matches
    rel_error: float | None = None       # the relative error of a tensor that differs
    scaled_error: float | None = None    # the same, a tensor far below the example judged at its scale
    deferred: object = None              # () -> the structural mistakes that fit, asked only when needed


@dataclass
class CheckResult:
    """One check: the output, one gradient, or one property."""

    name: str                            # "output", "gradient of k", or the property's text
    kind: str                            # "output" | "gradient" | "property"
    examples: int = 0                    # on how many examples it ran
    failure: Failure | None = None
    skipped: str = ""                    # why it did not run ("no backward given")

    @property
    def passed(self):
        """True when it ran and never failed."""
        return self.failure is None and not self.skipped


@dataclass
class CaseVerdict:
    """One fixed problem judged (a gradient-check case, as the grader runs it): the outputs and
    gradients that differ, each a failing CheckResult, what the protocol check found, the error
    the code raised, and the catalogued mistake it matches (``matches``: every one that fits)."""

    checks: list = field(default_factory=list)      # CheckResult of each output or gradient that differs
    notes: list = field(default_factory=list)       # ".grad assigned instead of accumulated", a write
    error: BaseException | None = None              # what the code under test raised, if it did
    mistake: object = None
    matches: list = field(default_factory=list)
    deferred: object = None                         # () -> the structural mistakes that fit, when needed

    @property
    def ok(self):
        """True when the code ran, every output and gradient agreed, and the protocol held."""
        return self.error is None and not self.checks and not self.notes


@dataclass
class ConformanceReport:
    """The result of ``conform``: ``ok``, ``checks`` (CheckResult), and how it was run."""

    component: str
    implementation: str
    examples: int
    seed: int
    tolerance: float
    dtype: str
    checks: list = field(default_factory=list)
    error: str = ""                      # the implementation could not be run at all
    notes: list = field(default_factory=list)   # how the checks were narrowed, one line each
    convention: dict = field(default_factory=dict)  # the convention the code was judged under
    warnings: list = field(default_factory=list)    # what the engine could not try (stale mistakes)
    scope: str = ""                      # what the code was checked on ("causal=True and H_kv = H")

    @property
    def verdict(self):
        """ "conforms", "conforms under convention" (the code computes npformer's maths in
        another usual convention, named in ``convention``) or "does not conform"."""
        ran = [c for c in self.checks if not c.skipped]
        if self.error or not ran or not all(c.passed for c in ran):
            return "does not conform"
        return "conforms under convention" if self.convention else "conforms"

    @property
    def ok(self):
        """True when the verdict is "conforms" or "conforms under convention": every check that
        ran held (and at least one ran)."""
        return self.verdict != "does not conform"

    def __bool__(self):
        # ``assert conform(...)`` must fail on code that does not conform: a report is truthy
        # exactly when it is ``ok`` (a dataclass would otherwise be truthy whatever it says)
        return self.ok

    @property
    def failures(self):
        """The checks that failed."""
        return [c for c in self.checks if c.failure is not None]

    def raise_if_failed(self):
        """For a pytest test: raise ``ConformanceError`` (the report as message) unless ``ok``."""
        if not self.ok:
            raise ConformanceError("\n" + str(self))

    def summary(self):
        """One line: "conforms (float64, 100 examples; every property)" or what failed: the
        verdict, the precision it was judged at, the examples, the scope, what was not run."""
        if self.error:
            return f"does not run: {self.error}"
        how = f"{self.dtype}, {self.examples} examples" + (f", only {self.scope}" if self.scope else "")
        if self.ok:
            said = ", ".join(f"{k}={v!r}" for k, v in self.convention.items())
            head = f"conforms under convention: {said}" if self.convention else "conforms"
            return f"{head} ({how}; {self._not_run() or 'every property'})"
        ran = [c for c in self.checks if not c.skipped]
        skipped = len(self.checks) - len(ran)
        return (f"does not conform: {len(self.failures)} of {len(ran)} checks fail ({how}"
                + (f"; {skipped} not run)" if skipped else ")"))

    def _not_run(self):
        """ "4 checks not run: it needs eps=1e-12; ..." (each distinct reason once), or "". """
        skipped = [c for c in self.checks if c.skipped]
        if not skipped:
            return ""
        reasons = list(dict.fromkeys(c.skipped.removeprefix("not run: ") for c in skipped))
        more = f" (and {len(reasons) - 2} more reasons)" if len(reasons) > 2 else ""
        return (f"{len(skipped)} check{'s' if len(skipped) > 1 else ''} not run: "
                + "; ".join(reasons[:2]) + more)

    def __str__(self):
        """The report: what was compared, the catalogued mistake first when one is named (with
        the checks it shows in), notes, every check, the summary. An error or a smallest example
        shared by several checks is printed once; the later checks point back to it."""
        head = (f"{self.implementation} against npformer's {self.component} ({self.dtype}, tolerance "
                f"{self.tolerance:.0e}, up to {self.examples} examples, seed {self.seed})")
        lines = textwrap.wrap(head, WIDTH, subsequent_indent="  ")
        named = {}
        for check in self.failures:
            if check.failure.mistake is not None:
                named.setdefault(check.failure.mistake.name, (check.failure.mistake, []))[1].append(check.name)
        for mistake, names in named.values():
            for text in (f"the mistake: {mistake.name}: {mistake.says}", f"re-check: {mistake.recheck}",
                         f"seen in: {', '.join(names)}"):
                lines += textwrap.wrap(text, WIDTH, initial_indent="  ", subsequent_indent="    ",
                                       break_on_hyphens=False)
        for note in self.warnings:
            lines += textwrap.wrap(f"warning: {note}", WIDTH, initial_indent="  ", subsequent_indent="    ")
        for note in self.notes:
            lines += textwrap.wrap(f"note: {note}", WIDTH, initial_indent="  ", subsequent_indent="    ")
        said, shown = {}, {}
        for check in self.checks:
            lines += _check_lines(check, said, shown)
        lines.append(self.summary())
        return "\n".join(lines)


def _check_lines(check, said, shown):
    """One check's lines; ``said`` {what a failure says: the check that said it first} and
    ``shown`` {id of an example: the check that showed it}, filled as the report goes."""
    status = "ok  " if check.passed else "skip" if check.skipped else "FAIL"
    plural = "" if check.examples == 1 else "s"
    count = f"{check.examples} example{plural}" if check.kind != "property" or check.examples > 1 else ""
    name = check.name if len(check.name) <= 70 else check.name[:67] + "..."
    extra = check.skipped or count
    line = f"  {status}  {name:70} {extra}".rstrip()
    lines = [line] if len(line) <= WIDTH else [f"  {status}  {name}", f"        {extra}"]
    failure = check.failure
    if failure is None:
        return lines
    raised = failure.message.split("your implementation raised ", 1)
    key = raised[1] if len(raised) == 2 else None
    if key in said:
        return lines + [f"        raised the same error as {_short(said[key])}"]
    if key is not None:
        said[key] = check.name
    texts = [failure.message]
    if failure.mistake is None:
        texts += [f"diagnosis: {diagnosis}" for diagnosis in failure.diagnoses]
    for text in texts:
        lines += textwrap.wrap(text, WIDTH, initial_indent=" " * 8, subsequent_indent=" " * 10,
                               break_on_hyphens=False)
    described = failure.example.describe(WIDTH - 12) if failure.example is not None else None
    if described in shown:
        lines.append(f"        smallest example: the one of {_short(shown[described])} above")
    elif described is not None:
        shown[described] = check.name
        lines.append("        smallest example:")
        lines += ["          " + line for line in described.split("\n")]
    return lines


def _short(name):
    return name if len(name) <= 40 else name[:37] + "..."
