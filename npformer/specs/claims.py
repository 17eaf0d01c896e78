"""The assertions a claim is written with, and how its facts are reported.

A claim is a fact the tutorial (or mathematics) states about a component, checked on a
learner's package: ``check(learner, reference) -> detail or None``, raising ``ClaimFailed``
with a one-line account. ``learner`` is the learner's npformer (``learner.t02_linear``...).
A claim asserts through this module's ``close`` and ``zero`` (``claims.close(...)``). Where it
is graded, its program runs twice under ``recording``: with the learner's code, where only the
arrays it asserts on are kept, and in the judge with npformer's own; the judge then asserts
the learner's arrays against its own (``npformer.exercises.verdict``). A claim whose test is a
condition of its own comes in two halves: ``compute(learner)`` returns arrays (or ``raised``'s
account of an error, which the judge cannot verify) and ``judge(facts)`` decides, with
``expects``.
"""
from __future__ import annotations

import builtins
import contextlib

import numpy as np

from .facts import differs


class ClaimFailed(AssertionError):
    """A claim does not hold for the learner's code; the message says where and by how much."""


def rng():
    """The generator every claim draws from (fixed: a claim's numbers never change)."""
    return np.random.default_rng(7)


def close(what, mine, expected, tol=1e-9):
    """ClaimFailed unless ``mine`` equals ``expected`` to ``tol`` (the properties' test of
    closeness, ``facts.differs``: relative to the largest entry, absolute near 0)."""
    found = differs(what, mine, expected, tol)
    if found:
        raise ClaimFailed(found)


def zero(what, array):
    """ClaimFailed unless every entry of ``array`` is exactly 0 (and not NaN)."""
    array = np.asarray(array)
    if (array != 0).any():
        at = _index(array != 0)
        raise ClaimFailed(f"{what} must be exactly 0, but at {at} it is {array[at]:.3g}")


@contextlib.contextmanager
def recording(records):
    """Inside the block ``close`` and ``zero`` assert nothing: each appends what it was given
    to ``records`` ({"kind", "what", "arrays": [float64 arrays], "tol"}), so that a claim's
    program runs to its end and every array it asserts on can be compared where it is judged.
    One claim at a time, in the process that runs it."""
    global close, zero
    asserting = close, zero

    def noting_close(what, mine, expected, tol=1e-9):
        records.append({"kind": "close", "what": str(what), "tol": float(tol),
                        "arrays": [np.asarray(mine, np.float64), np.asarray(expected, np.float64)]})

    def noting_zero(what, array):
        records.append({"kind": "zero", "what": str(what), "tol": 0.0, "arrays": [np.asarray(array, np.float64)]})
    close, zero = noting_close, noting_zero
    try:
        yield records
    finally:
        close, zero = asserting


def raised(call):
    """None when ``call()`` returns; else the fact of what it raised: {"type": the name of the
    nearest builtin exception class it is an instance of (``except ValueError`` catches it),
    "text": its message}. What a claim's program reports for the judge to decide on."""
    try:
        call()
    except Exception as error:                 # noqa: BLE001 - the learner's code raised: a fact
        kind = next(c for c in type(error).__mro__ if getattr(builtins, c.__name__, None) is c)
        return {"type": kind.__name__, "text": str(error)[:500]}
    return None


def expects(name, fact, returned, call):
    """ClaimFailed unless ``fact`` (``raised``'s) says the call raised the builtin exception
    ``name``; ``returned`` says what went wrong when the call returned, ``call`` names it."""
    if fact is not None and not (isinstance(fact, dict) and isinstance(fact.get("type"), str)
                                 and isinstance(fact.get("text"), str)):
        raise ClaimFailed(f"the claim's run did not report whether {call} raised")
    if fact is None:
        raise ClaimFailed(f"{returned}; it must raise {name}")
    if fact["type"] != name:
        raise ClaimFailed(f"{call} raised {fact['type']}: {fact['text']}; it must raise {name}")


def _index(flags):
    return tuple(int(i) for i in np.argwhere(flags)[0])


def upstream_at(shape, position, generator):
    """An upstream gradient that is random at ``position`` (a tuple of leading indices) and 0 elsewhere."""
    G = np.zeros(shape)
    G[position] = generator.standard_normal(G[position].shape)
    return G
