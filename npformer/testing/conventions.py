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

import functools
import itertools

from ..specs import CONVENTIONS, FAMILIES


def conventions_to_try(component, untaken=()):
    """The conventions to try for ``component``, each alone, then together: an option
    convention only when the code does not take that option (code that takes ``layout`` is
    asked for each layout by name)."""
    alone = [(said, variant) for said, variant in CONVENTIONS.get(component, [])
             if variant is not None or all(name in untaken for name in said)]
    return alone + list(together(component, untaken))


def together(component, untaken=()):
    """(said, variant) of every combination of two or more conventions that can hold at once:
    the values of a family's axes (``spec.conventions``), and an option convention with one of
    them (interleaved RoPE pairs and a partial rotation), smallest first."""
    options = [said for said, variant in CONVENTIONS.get(component, [])
               if variant is None and all(name in untaken for name in said)]
    for axes, build in FAMILIES.get(component, []):
        names = list(axes)
        for count in range(2, len(names) + 1):
            for chosen in itertools.combinations(names, count):
                for values in itertools.product(*(axes[name] for name in chosen)):
                    said = dict(zip(chosen, values))
                    if build(said) is not None:
                        yield said, functools.partial(build, said)
        for option in options:
            for name in names:
                for value in axes[name]:
                    yield {**option, name: value}, functools.partial(build, {name: value})


def options(component):
    """The names of the reference's options that are conventions of ``component`` ("layout")."""
    return {name for said, variant in CONVENTIONS.get(component, []) if variant is None for name in said}


def convention_given(component, convention):
    """(said, variant) for a convention given up front; ValueError naming ``convention``."""
    for said, variant in CONVENTIONS.get(component, []) + list(together(component, convention)):
        if said == dict(convention):
            return said, variant
    known = "; ".join(describe(s) for s, _ in CONVENTIONS.get(component, [])) or "none"
    known += " (or several of them at once)" if FAMILIES.get(component) else ""
    raise ValueError(f"convention: expected one of {known} for {component}, got {convention!r}")


def describe(said):
    """ "layout='interleaved'" """
    return ", ".join(f"{k}={v!r}" for k, v in said.items())
