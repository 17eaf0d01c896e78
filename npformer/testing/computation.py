"""Where the code under test computes, as the judge sees it: the one seam it asks for arrays through.

A judge (``engine.judge_functions`` and the grader's ``verdict``) never calls the code under test
itself. It asks a *computation* three questions, chooses every input, and compares the arrays
that come back with npformer's own:

- ``subject(component)``: a ``Subject`` of the component whose ``result(example)`` gives the
  output and one gradient per float input on a drawn example;
- ``evaluate(build, upstream, repeat)``: the ``problem.Result`` of a fixed problem;
- ``claim(check)``: a ``ClaimRun``, the arrays a claim's program computed.

``Patched(patches)`` answers in this process, npformer's functions replaced by ``patches`` (a
learner's, a catalogued mistake's, or none: npformer itself). The grader's ``Learner``
(``npformer.exercises.learner_proxy``) answers the same questions from a learner's process
behind the walls; nothing else about that process reaches the judge.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..specs import claims as kit
from .patching import patched
from .problem import run
from .subject import Subject


@dataclass
class ClaimRun:
    """What a claim's program computed: ``arrays``, every array its ``close`` and ``zero`` were
    given, in order (``kit.recording``); or for a claim in two halves ``facts``, what its
    ``compute`` returned; or ``error``, the exception the code under test raised."""

    arrays: list = field(default_factory=list)
    facts: dict | None = None
    error: BaseException | None = None
    records: list = field(default_factory=list)   # where the claim ran here: what each assertion was


class PatchedSubject(Subject):
    """npformer's reference of a component, run with ``patches`` in place."""

    def __init__(self, component, patches):
        from .components import component_named
        forward, backward = component_named(component).reference_pair()
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


class Patched:
    """The code under test in this process: npformer with ``patches`` in place."""

    def __init__(self, patches=None):
        self.patches = dict(patches or {})

    @property
    def functions(self):
        """The paths of npformer's functions this computation replaces (its code's own)."""
        return set(self.patches)

    def subject(self, component):
        """A ``Subject`` of ``component`` computed with the patches in place."""
        return PatchedSubject(component, self.patches)

    def evaluate(self, build, upstream=None, repeat=1):
        """``problem.run(build, upstream, repeat)`` with the patches in place."""
        with patched(self.patches):
            return run(build, upstream, repeat)

    def claim(self, check):
        """The ``ClaimRun`` of one claim with the patches in place."""
        import npformer
        with patched(self.patches), np.errstate(all="ignore"):
            return run_claim_program(check, npformer)


def run_claim_program(check, package):
    """The ``ClaimRun`` of ``check`` on ``package`` (npformer, whatever is patched into it): its
    ``compute`` half's facts, or every array its assertions were given."""
    compute = getattr(check, "compute", None)
    try:
        if compute is not None:
            return ClaimRun(facts=compute(package))
        records = []
        with kit.recording(records):
            check(package, package)
        return ClaimRun(arrays=[array for record in records for array in record["arrays"]], records=records)
    except Exception as error:                 # noqa: BLE001 - the code under test raised
        return ClaimRun(error=error)
