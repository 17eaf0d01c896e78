"""The teacher's record of a hand-out: which exercises, how many points each, what was handed out.

``npformer exercises DIR --course COURSE.json`` writes it beside the hand-out; the teacher keeps
it, and ``npformer grade SUBMISSIONS --course COURSE.json`` grades every submission by it: the
exercise list and the points are the course's, never a submission's, and a submission whose
read-only files (the marker, the README) differ from the hand-out says so.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass

from .. import __version__
from ..core.fileio import write_json
from . import catalog
from .workspace import MARKER, WorkspaceError, read_regular

KIND = "npformer course"
FORMAT = 1
READ_ONLY = (MARKER, "README.md")           # files a learner has no reason to change
# what an exercise that another blocks earns (the training task, while one it builds on fails):
# nothing and no grading (the default), or graded with npformer's own code for the failing ones
WHEN_BLOCKED = ("no points", "graded with npformer's code")


class CourseError(ValueError):
    """A course file that cannot be used (message: one line naming it)."""


def sha256(path):
    """The SHA-256 of a file's bytes, or None when it is missing, not a regular file or larger
    than a workspace's files may be (``workspace.read_regular``)."""
    try:
        return hashlib.sha256(read_regular(path)).hexdigest()
    except (OSError, WorkspaceError):
        return None


@dataclass(frozen=True)
class Course:
    """The exercises (``catalog.Exercise``), their ``points``, the track (``forward``), the
    SHA-256 of each read-only file as handed out (``manifest``) and what an exercise blocked by
    another earns (``when_blocked``, one of ``WHEN_BLOCKED``)."""

    exercises: tuple
    points: dict
    forward: bool
    manifest: dict
    version: str = __version__
    when_blocked: str = WHEN_BLOCKED[0]

    @property
    def total(self):
        """The points of the whole course."""
        return sum(self.points[e.name] for e in self.exercises)

    def applied_to(self, workspace):
        """(the workspace graded by this course's list, notes on files changed since the hand-out)."""
        notes = []
        for name, digest in self.manifest.items():
            found = sha256(os.path.join(workspace.directory, name))
            if found != digest:
                state = "is missing" if found is None else "differs from the hand-out"
                notes.append(f"{name} {state}; the course's exercise list is used ("
                             f"{', '.join(e.name for e in self.exercises)})")
        return dataclasses.replace(workspace, exercises=self.exercises, forward=self.forward), notes


def write_course(path, workspace, points=10, when_blocked=WHEN_BLOCKED[0]):
    """Write the course file of ``workspace`` (just handed out) to ``path``; ``points`` per
    exercise (a number, or {name: points}); ``when_blocked``: see ``WHEN_BLOCKED``."""
    if when_blocked not in WHEN_BLOCKED:
        raise CourseError(f"when_blocked: expected one of {', '.join(map(repr, WHEN_BLOCKED))}, got {when_blocked!r}")
    given = points if isinstance(points, dict) else {e.name: points for e in workspace.exercises}
    for e in workspace.exercises:
        value = given.get(e.name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise CourseError(f"points: expected a number >= 0 for {e.name}, got {value!r}")
    data = {"kind": KIND, "format": FORMAT, "npformer": __version__, "forward": workspace.forward,
            "exercises": [{"name": e.name, "points": given[e.name]} for e in workspace.exercises],
            "when_blocked": when_blocked,
            "manifest": {name: sha256(os.path.join(workspace.directory, name)) for name in READ_ONLY}}
    write_json(os.fspath(path), data)
    return load_course(path)


def load_course(path):
    """The ``Course`` in the JSON file ``path``; ``CourseError`` when it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as error:
        raise CourseError(f"--course: cannot read {path} ({error})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND or data.get("format") != FORMAT:
        raise CourseError(f"--course: {path} is not an npformer course file (format {FORMAT}; write one "
                          f"with `npformer exercises DIR --course FILE`)")
    try:
        exercises = tuple(catalog.exercise_named(e["name"]) for e in data["exercises"])
        points = {e["name"]: float(e["points"]) for e in data["exercises"]}
        manifest = {str(k): v for k, v in data["manifest"].items()}
        when_blocked = data.get("when_blocked", WHEN_BLOCKED[0])
        if when_blocked not in WHEN_BLOCKED:
            raise ValueError(f"when_blocked is {when_blocked!r}, not one of {', '.join(map(repr, WHEN_BLOCKED))}")
        return Course(exercises, points, bool(data["forward"]), manifest, str(data["npformer"]), when_blocked)
    except (KeyError, TypeError, ValueError) as error:
        raise CourseError(f"--course: {path} is damaged ({error})") from None
