"""The facts each component must satisfy, as checks any implementation can be put through.

A property is ``check(subject, example)``: ``subject`` runs the implementation under test
(``subject.output(args, options)``, and ``subject.gradients(args, options, d_out)`` when it
has a backward, else None), ``example`` is a drawn ``Example`` (None for the properties that
hold on fixed numbers). A check returns nothing, or a short detail, and raises
``PropertyFailed`` with a one-line account when the fact does not hold.

Some facts are the tutorial's own (the weights [0.670, 0.330] of its scores [0.707, 0]); most
are mathematics every correct implementation obeys (weights sum to 1, masked keys change
nothing, RoPE keeps lengths, a norm ignores rescaling). Each is declared in the spec of its
concept (``npformer.specs``, ``spec.prop``).
"""
from __future__ import annotations

from ..specs import PROPERTIES, Property  # noqa: F401
from ..specs.facts import TOL, PropertyFailed, close, precision, zero  # noqa: F401


def properties_of(component):
    """The properties of ``component`` (a name), in declaration order."""
    return PROPERTIES.get(component, [])
