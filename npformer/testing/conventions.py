"""The usual conventions in which correct code differs from npformer's choices.

Before the engine blames the maths, it runs the reference under each convention of the
component and, when the code agrees with one everywhere, reports "conforms under convention"
instead of a mistake. A convention is either an option value the reference already has
(``layout='interleaved'`` for RoPE) or a variant of the reference (a summed loss, tanh GELU,
a fully masked row given the mean of the values, unbiased variance, eps outside the square
root, an additive finite mask, AdamW without bias correction), each exact, built from
npformer's own functions where they reach. Each is declared in the spec of its concept
(``npformer.specs``, ``spec.convention``).
"""
from __future__ import annotations

from ..specs import CONVENTIONS


def of(component, untaken=()):
    """The conventions to try for ``component``: an option convention only when the code does
    not take that option (code that takes ``layout`` is asked for each layout by name)."""
    return [(said, variant) for said, variant in CONVENTIONS.get(component, [])
            if variant is not None or all(name in untaken for name in said)]


def find(component, convention):
    """(said, variant) for a convention given up front; ValueError naming ``convention``."""
    for said, variant in CONVENTIONS.get(component, []):
        if said == dict(convention):
            return said, variant
    known = "; ".join(describe(s) for s, _ in CONVENTIONS.get(component, [])) or "none"
    raise ValueError(f"convention: expected one of {known} for {component}, got {convention!r}")


def describe(said):
    """ "layout='interleaved'" """
    return ", ".join(f"{k}={v!r}" for k, v in said.items())
