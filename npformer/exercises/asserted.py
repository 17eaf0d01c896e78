"""A claim's assertions, recorded where its program runs and checked again where it is judged.

Most claims end in ``close(what, mine, expected, tol)`` and ``zero(what, array)`` (``npformer.specs.claims``).
``recording(check)`` runs a claim with those two replaced by versions that note their arrays
before asserting, so the learner's process can send them; ``rechecked(records, expected)``
asserts them again in the judge, and holds them to the claim's shape of assertions as
npformer's own code makes them (``structure``: the same kinds, names and shapes in the same
order), so that a claim whose assertions did not all run is no pass.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ..specs import claims as kit


@contextlib.contextmanager
def recording(check, records):
    """Inside the block, the claims' ``close`` and ``zero`` (``npformer.specs.claims``, which
    ``check`` asserts through) append their arrays to ``records``; a claim runs alone, one at a
    time, in the process that records it."""
    close_now, zero_now = kit.close, kit.zero

    def close(what, mine, expected, tol=1e-9):
        records.append({"kind": "close", "what": str(what), "mine": np.asarray(mine, np.float64),
                        "expected": np.asarray(expected, np.float64), "tol": float(tol)})
        return close_now(what, mine, expected, tol)

    def zero(what, array):
        records.append({"kind": "zero", "what": str(what), "array": np.asarray(array)})
        return zero_now(what, array)
    kit.close, kit.zero = close, zero
    try:
        yield records
    finally:
        kit.close, kit.zero = close_now, zero_now


def structure(records):
    """[(kind, what, shapes)] of recorded assertions."""
    return [(r["kind"], r["what"], tuple(np.shape(r[k]) for k in ("mine", "expected", "array") if k in r))
            for r in records]


def rechecked(records, expected):
    """None when every recorded assertion holds again here and they are the ones ``expected``
    (``structure`` of npformer's own run); else the failure's one-line account."""
    for record in records:
        try:
            if record["kind"] == "close":
                kit.close(record["what"], record["mine"], record["expected"], record["tol"])
            else:
                kit.zero(record["what"], record["array"])
        except kit.ClaimFailed as failure:
            return str(failure)
    if structure(records) != expected:
        return (f"the claim's checks did not all run as npformer's do ({len(records)} of "
                f"{len(expected)} made)")
    return None


def valid(records):
    """True when ``records`` (as read from the learner's process) are assertions of this form."""
    if not isinstance(records, list):
        return False
    for r in records:
        if not isinstance(r, dict) or r.get("kind") not in ("close", "zero") or not isinstance(r.get("what"), str):
            return False
        arrays = ("mine", "expected") if r["kind"] == "close" else ("array",)
        if not all(isinstance(r.get(k), np.ndarray) for k in arrays):
            return False
        if r["kind"] == "close" and not isinstance(r.get("tol"), float):
            return False
    return True
