"""The gradient-check cases: one small, random, float64 problem per public component.

``CASES[name](rng, size)`` returns ``(target, inputs, options)`` for ``gradcheck``, in three
sizes. Each is declared in the spec of its concept (``npformer.specs``, ``spec.case``), in the
tutorial's order. Tests run every case in several shapes and on both tracks; ``npformer
gradcheck`` prints the table and names any public component without one.
"""
from __future__ import annotations

from ..specs import CASES, SPECS  # noqa: F401

def in_tutorial_order(names):
    """``names`` of cases in the order their specs declare them (the tutorial's)."""
    order = [case for spec in SPECS for case in spec.cases]
    return sorted(names, key=lambda name: order.index(name) if name in order else len(order))
