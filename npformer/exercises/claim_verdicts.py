"""The claims each exercise is graded on after its gradient checks, and how the judge decides them.

A claim is a fact the tutorial (or mathematics) states about what a learner builds, checked on
their package: ``check(learner, reference) -> detail or None``, raising ``ClaimFailed``. Each
is declared in the spec of its concept (``npformer.specs``, ``spec.claim``); its assertions are
``npformer.specs.claims``'s. ``claims_of(name)`` lists ``(text, check)`` for one exercise.

The code under test runs a claim's program and hands back arrays (``computation.ClaimRun``);
``decide(check, theirs, ours)`` is the verdict, made in the judge from those arrays and from the
same program run with npformer's own code (``ours``):

- a claim written with ``close`` and ``zero``: their arrays, as many and of the shapes of
  npformer's, must hold each assertion among themselves and equal npformer's arrays;
- a claim in two halves: their ``compute`` half's arrays (or None where npformer's gives None)
  go to the claim's ``judge`` half, and must equal npformer's where the claim is ``compared``;
- what only their process can see (what a call raised) is a fact they state: it can fail them,
  never pass them ("said by your code, not verified").
"""
from __future__ import annotations

import numpy as np

from ..specs import CLAIMS
from ..specs import claims as kit
from ..specs.claims import ClaimFailed  # noqa: F401

SAID = "said by your code, not verified"


def claims_of(name):
    """The claims of exercise ``name``, in order."""
    return list(CLAIMS.get(name, []))


class Decision:
    """One claim's verdict: ``ok``; ``detail`` (what holds, or what failed); ``error``, the one
    their code raised; ``verified``, False when the verdict rests on what their process said."""

    def __init__(self, ok, detail=None, error=None, verified=True):
        self.ok, self.detail, self.error, self.verified = ok, detail, error, verified


def decide(check, theirs, ours):
    """The ``Decision`` on ``check`` from ``theirs`` (the code under test's ``ClaimRun``) and
    ``ours`` (npformer's own, or None for a claim that is not ``compared``)."""
    from ..testing.subject import describe_error
    if theirs.error is not None:
        return Decision(False, f"your code raised {describe_error(theirs.error)}", theirs.error)
    try:
        if getattr(check, "compute", None) is not None:
            return _two_halves(check, theirs.facts, ours)
        return _asserted(theirs.arrays, ours.records)
    except ClaimFailed as failure:
        return Decision(False, str(failure))


def _asserted(arrays, records):
    """Their arrays against the assertions npformer's run made (kinds, names, shapes, order)."""
    wanted = [np.shape(a) for record in records for a in record["arrays"]]
    if len(arrays) != len(wanted) or any(np.shape(a) != s for a, s in zip(arrays, wanted)):
        raise ClaimFailed(f"the claim's program computed {len(arrays)} arrays of shapes "
                          f"{[np.shape(a) for a in arrays][:4]}; npformer's computes {len(wanted)} of {wanted[:4]}")
    at = 0
    for record in records:
        mine = arrays[at:at + len(record["arrays"])]
        at += len(mine)
        if record["kind"] == "zero":
            kit.zero(record["what"], mine[0])
        else:
            kit.close(record["what"], mine[0], mine[1], record["tol"])
        for yours, right in zip(mine, record["arrays"]):
            kit.close(f"{record['what']} (against npformer's)", yours, right, max(record["tol"], 1e-9))
    return Decision(True)


def _two_halves(check, facts, ours):
    """Their ``compute`` half's facts, checked against npformer's (``ours``, None for a claim
    not ``compared``: its ``judge`` checks what it reads), then the claim's ``judge``."""
    if not isinstance(facts, dict):
        raise ClaimFailed("the claim's program did not return its table of results")
    right = ours.facts if ours is not None else {}
    for name, value in right.items():
        _same_kind(name, facts.get(name), value)
    if any(isinstance(v, dict) for v in right.values()):     # what a call raised: theirs alone
        try:
            detail = check.judge(facts)
        except ClaimFailed as failure:
            return Decision(False, f"{failure} ({SAID})", verified=False)
        return Decision(True, SAID if detail is None else f"{detail} ({SAID})", verified=False)
    for name, value in right.items():
        if isinstance(value, np.ndarray) and isinstance(facts.get(name), np.ndarray):
            kit.close(f"{name} (against npformer's)", facts[name], value, 1e-9)
    return Decision(True, check.judge(facts))


def _same_kind(name, yours, right):
    """ClaimFailed unless ``yours`` is what the judge asked for where npformer's run gave
    ``right``: None or a float64 array where it gave an array or None, None or an account of
    an error (two texts) where it gave one."""
    if yours is None:
        return
    if isinstance(right, dict):
        if isinstance(yours, dict) and set(yours) == {"type", "text"} and \
                all(isinstance(v, str) for v in yours.values()):
            return
    elif isinstance(yours, np.ndarray) and yours.dtype == np.float64 and \
            (right is None or yours.shape == np.shape(right)):
        return
    raise ClaimFailed(f"the claim's program returned {type(yours).__name__} "
                      f"{getattr(yours, 'dtype', '')}{np.shape(yours) if isinstance(yours, np.ndarray) else ''} "
                      f"for {name}; npformer's returns {type(right).__name__}{np.shape(right) if isinstance(right, np.ndarray) else ''}")
