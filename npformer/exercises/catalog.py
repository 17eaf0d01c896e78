"""The exercises, in the order the tutorial teaches them.

Each exercise names the function bodies a learner writes (``"file.py:qualname"``, the file
a path under npformer/): its backward bodies by default, its forward bodies too with
``--forward``. It is graded alone, with npformer's own code for everything else: on its
``components`` (drawn inputs, properties, catalogued mistakes) and on its gradient-check
``checks`` (cases, at the sizes given), and on its claims. ``builds_on`` lists the exercises
whose code the last exercise, training, runs together. The exercise for ``tNN_x.py`` is
numbered NN (there is no 12: generation, t12, has nothing to write; the optimizer and
training, outside the tNN files, come last). An exercise keeps its number in every workspace,
even when some are left out. Each is declared in the spec of its concept (``npformer.specs``,
``spec.exercise``).
"""
from __future__ import annotations

from ..specs import EXERCISES as DECLARED
from ..specs import Exercise, module_path  # noqa: F401

EXERCISES = tuple(sorted(DECLARED, key=lambda e: e.number))
BY_NAME = {exercise.name: exercise for exercise in EXERCISES}
# names an earlier numbering used, so that a workspace or a held-out set written then still loads
FORMER_NAMES = {"multi-head": "attention"}


def exercise_named(name):
    """The exercise called ``name`` ("attention") or numbered ``name`` ("4", "04")."""
    text = str(name).strip()
    if text.isdigit():
        for exercise in EXERCISES:
            if exercise.number == int(text):
                return exercise
    if text in BY_NAME:
        return BY_NAME[text]
    if text in FORMER_NAMES:
        return BY_NAME[FORMER_NAMES[text]]
    raise ValueError(f"exercise: expected a name or number of {', '.join(e.label for e in EXERCISES)}; "
                     f"got {name!r}")


def holding(address):
    """The exercise whose bodies include ``address`` ("t03_softmax.py:softmax_backward"): where a
    mistake in that function belongs, whatever the exercises are called or numbered."""
    for exercise in EXERCISES:
        if address in exercise.backward + exercise.forward:
            return exercise
    raise ValueError(f"address: expected one of the exercises' functions (\"file.py:qualname\"); got {address!r}")


def available(forward=False):
    """The exercises a workspace can hold: those with bodies to write, and the training task."""
    return [e for e in EXERCISES if e.functions(forward) or not (e.backward or e.forward)]


def select(start=None, only=None, forward=False):
    """The exercises ``npformer exercises`` writes: all, from ``start`` on, or ``only`` these."""
    if start is not None and only:
        raise ValueError("--start, --only: give one of them, not both")
    pool = available(forward)
    if only:
        chosen = [exercise_named(name) for name in only]
        for exercise in chosen:
            if exercise not in pool:
                raise ValueError(f"--only: {exercise.label} has only forward bodies to write; add --forward")
        return sorted(set(chosen), key=lambda e: e.number)
    if start is not None:
        first = exercise_named(start)
        if first not in pool:
            raise ValueError(f"--start: {first.label} has only forward bodies to write; add --forward")
        return [e for e in pool if e.number >= first.number]
    return pool
