"""The protocol rule every backward keeps: ``d_out``, the cache and the forward's inputs stay as
they were.

A caller may reuse all three: a residual hands the same ``d_out`` to two branches, a layer
applied twice runs backward on two caches, a second backward reads the same cache again. A
backward that writes into one of them (``d_out *= gamma``) returns the right numbers and still
breaks its caller, so the returned gradients cannot show it: copies taken before the call are
compared with the arrays after it. ``run_backward`` is what ``conform`` and the grader call.
"""
from __future__ import annotations

import dataclasses

import numpy as np

DEPTH = 4                        # how deep into nested caches (a block's cache of caches) to look

RULE = "the backward leaves d_out, the cache and the forward's inputs unchanged"

WROTE_D_OUT = ("your backward wrote into d_out (a residual that hands the same d_out to two "
               "branches then gets wrong gradients)")


def _arrays(value, path, depth, seen):
    """(path, array) of every ndarray reachable from ``value``: itself, the items of a tuple,
    list or dict, the fields of a dataclass or NamedTuple (a cache), to ``DEPTH`` levels."""
    if isinstance(value, np.ndarray):
        yield path, value
        return
    if depth == 0 or id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        items = zip(value._fields, value)
    elif isinstance(value, (tuple, list)):
        items = ((f"[{i}]", item) for i, item in enumerate(value))
    elif isinstance(value, dict):
        items = ((f"[{key!r}]", item) for key, item in value.items())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = ((f.name, getattr(value, f.name, None)) for f in dataclasses.fields(value))
    else:
        return
    for name, item in items:
        joined = f"{path}{name}" if name.startswith("[") else f"{path}.{name}" if path else name
        yield from _arrays(item, joined, depth - 1, seen)


def snapshot(value):
    """[(path, the array, a copy of it)] of every array reachable from ``value``."""
    return [(path, array, array.copy()) for path, array in _arrays(value, "", DEPTH, set())]


def first_change(taken):
    """The path of the first array of a ``snapshot`` that no longer equals its copy, or None."""
    for path, array, copy in taken:
        if array.shape != copy.shape or not np.array_equal(array, copy, equal_nan=True):
            return path
    return None


def violation(d_out, cache, inputs, names=None):
    """A check to run around one backward: ``check = violation(d_out, cache, inputs)`` before the
    call, ``check()`` after it gives the one-line account of what it wrote into, or None.
    ``inputs``: the forward's inputs (the arrays among them are watched), ``names`` theirs."""
    names = list(names or [f"input[{i}]" for i in range(len(inputs))])
    watched = [("d_out", snapshot(d_out)), ("cache", snapshot(cache))]
    watched += [(name, snapshot(x)) for name, x in zip(names, inputs) if isinstance(x, np.ndarray)]

    def check():
        for what, taken in watched:
            where = first_change(taken)
            if where is None:
                continue
            if what == "d_out":
                return WROTE_D_OUT
            if what == "cache":
                return (f"your backward wrote into the cache ({where or 'the cache'}): a layer applied "
                        f"twice, or a second backward on the same cache, then gets wrong gradients")
            return (f"your backward wrote into the forward's input {what}: the caller's array "
                    f"changed (a backward must leave d_out, the cache and the inputs as they were)")
        return None
    return check


def run_backward(backward, d_out, cache, inputs=(), names=None):
    """(what ``backward(d_out, cache)`` returned, the protocol violation or None)."""
    check = violation(d_out, cache, inputs, names)
    returned = backward(d_out, cache)
    return returned, check()
