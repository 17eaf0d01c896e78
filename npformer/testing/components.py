"""The components ``conform`` checks: each one's documented signature, inputs and reference.

A component is a function with a fixed signature (npformer's own plain function is the
example to follow). ``conform(name, forward, backward)`` calls ``forward(*args, **options)``
with the inputs its strategy draws, and ``backward(d_out, cache)`` with a random upstream
gradient; it compares both with npformer's reference in float64.

``forward`` returns ``(out, cache)`` when a ``backward`` is given, else the output alone.
``backward`` returns one gradient per float input, in order (or one per input, None for
integer inputs). With ``vjp=`` instead of ``backward``, ``vjp(inputs, d_out)`` receives the
inputs as a dict ``{argument name: value}`` and returns the gradients the same way.

Each component is declared once, in the spec of its concept file (``npformer.specs``);
``COMPONENTS`` are those ``conform`` offers, ``LAYERS`` the layers made of layers (their
weights as arguments, in npformer's own layout) that the grader judges blocks and models on.
"""
from __future__ import annotations

from ..specs import COMPONENTS, LAYERS, Component  # noqa: F401


def component_named(name):
    """The component called ``name`` (one of ``COMPONENTS`` or ``LAYERS``); ValueError listing
    them all otherwise."""
    if name in COMPONENTS:
        return COMPONENTS[name]
    if name in LAYERS:
        return LAYERS[name]
    raise ValueError(f"component: expected one of {', '.join(list(COMPONENTS) + list(LAYERS))}, got {name!r}")
