"""The gradient-check cases: one small, random, float64 problem per public component.

``CASES[name](rng, size)`` returns ``(target, inputs, options)`` for ``gradcheck``, in three
sizes. Each is declared in the spec of its concept (``npformer.specs``, ``spec.case``), in the
tutorial's order. Tests run every case in several shapes and on both tracks, ``npformer
gradcheck`` prints the table, and ``missing_cases()`` names any public component without one.
"""
from __future__ import annotations

from ..specs import CASES, SPECS  # noqa: F401

# Public names that have nothing to differentiate, and why.
NOTHING_TO_CHECK = {
    "SinusoidalPositions": "a fixed table looked up by integer positions: no float input, no parameter",
    "Module": "the abstract base class",
    "Cache": "a record, not a computation",
}


def public_components():
    """Every public Module subclass and function pair exported by ``npformer``."""
    import npformer
    from ..core.module import Module
    names = {name for name, obj in vars(npformer).items()
             if isinstance(obj, type) and issubclass(obj, Module) and not name.startswith("_")}
    # function pairs: every exported ``f_forward`` with an exported ``f_backward``
    names |= {name[:-len("_forward")] for name in vars(npformer)
              if name.endswith("_forward") and name[:-len("_forward")] + "_backward" in vars(npformer)}
    return sorted(names - set(NOTHING_TO_CHECK))


def missing_cases():
    """Public components without a registered gradient-check case (should be [])."""
    return [name for name in public_components() if name not in CASES]


def in_tutorial_order(names):
    """``names`` of cases in the order their specs declare them (the tutorial's)."""
    order = [case for spec in SPECS for case in spec.cases]
    return sorted(names, key=lambda name: order.index(name) if name in order else len(order))
