"""The claims each exercise is graded on after its gradient checks.

A claim is a fact the tutorial (or mathematics) states about what a learner builds, checked on
their package: ``check(learner, reference) -> detail or None``, raising ``ClaimFailed``. Each
is declared in the spec of its concept (``npformer.specs``, ``spec.claim``); its assertions are
``npformer.specs.claims``'s. ``of(name)`` lists ``(text, check)`` for one exercise.
"""
from __future__ import annotations

from ..specs import CLAIMS
from ..specs.claims import ClaimFailed  # noqa: F401


def of(name):
    """The claims of exercise ``name``, in order."""
    return list(CLAIMS.get(name, []))
