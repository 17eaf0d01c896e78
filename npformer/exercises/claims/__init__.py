"""The claims each exercise is graded on after its gradient checks.

``of(name)`` lists ``(text, check)`` for one exercise; the modules of this package
register them with ``@claim(exercise, text)``.
"""
from __future__ import annotations

from . import components, models, training  # noqa: F401  (each registers its claims)
from .registry import CLAIMS, ClaimFailed, claim  # noqa: F401


def of(name):
    """The claims of exercise ``name``, in order."""
    return list(CLAIMS.get(name, []))
