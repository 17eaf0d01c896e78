"""A learner's workspace: the plain-track files to fill in, a README, and a marker file.

``write_workspace(directory, ...)`` builds the whole workspace in a temporary sibling
and renames it into place, so a half-written workspace never exists and an existing
directory holding anything (the learner's work) is never touched.
``load_workspace(directory)`` reads it back and refuses a directory that is not one.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass

from .. import __version__
from ..core.fileio import atomic_write, write_json
from . import catalog
from .readme import workspace_readme
from .stubs import HINTS, cut

MARKER = "npformer-workspace.json"
KIND = "npformer exercises"
FORMAT = 1
FILE_LIMIT = 1 << 20             # bytes of one file the grader reads from a workspace (a file there is ~30 kB)


class WorkspaceError(ValueError):
    """A directory that cannot be used as a workspace (message: one line naming it)."""


def read_regular(path, limit=FILE_LIMIT):
    """The bytes of ``path``: a regular file of at most ``limit`` bytes, opened without following
    a link and without waiting on a pipe. FileNotFoundError when it is missing; WorkspaceError
    (one line: why) for a link, a pipe, a device, a folder, or a file larger than ``limit``."""
    name = os.path.basename(path)
    if not stat.S_ISREG(os.lstat(path).st_mode):
        kind = "a link" if os.path.islink(path) else "not a regular file (a pipe, a device or a folder)"
        raise WorkspaceError(f"{name} is {kind}: refused (keep your own file there)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as error:
        if error.errno == errno.ENOENT:
            raise
        raise WorkspaceError(f"{name} cannot be read ({error.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):          # changed since it was looked at
            raise WorkspaceError(f"{name} is not a regular file: refused")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
        raise WorkspaceError(f"{name} holds more than {limit:,} bytes, more than a file here may hold: refused")
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Workspace:
    """What the marker file of a workspace records."""

    directory: str
    exercises: tuple          # catalog.Exercise, in order
    forward: bool
    hints: str                # "none" | "shapes" | "formulas" (see stubs.cut)
    solutions: bool
    version: str

    @property
    def files(self):
        """The learner's files, in the order the exercises first need them."""
        return tuple(dict.fromkeys(f for e in self.exercises for f in e.files(self.forward)))

    def path(self, name):
        """The path in the workspace of one of the library's files: a workspace is one flat
        folder."""
        return os.path.join(self.directory, os.path.basename(name))


def library_dir():
    """The directory of the installed npformer package (where the plain-track files are)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stub_message(exercise, qualname):
    """What a stub says when it runs: the exercise, where the tutorial explains it, what to write."""
    return f"exercise {exercise.number:02d} ({exercise.title}; {exercise.section}): write {qualname}"


def learner_sources(exercises, forward=False, hints="shapes", solutions=False):
    """{file name: the text the learner receives} for the chosen exercises."""
    stubs = {}
    for exercise in exercises:
        for address in exercise.functions(forward):
            name, qualname = address.split(":")
            stubs.setdefault(name, {})[qualname] = stub_message(exercise, qualname)
    sources = {}
    for name, wanted in stubs.items():
        with open(os.path.join(library_dir(), name), encoding="utf-8") as f:
            source = f.read()
        sources[name] = cut(source, {} if solutions else wanted, hints)
    return sources


def _check_free(directory):
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise WorkspaceError(f"DIR: {directory} exists and is not a directory")
    if os.path.isdir(directory) and os.listdir(directory):
        raise WorkspaceError(f"DIR: {directory} already exists and is not empty; it is never "
                             f"overwritten (it may hold a learner's work): choose a new directory")


def write_workspace(directory, start=None, only=None, forward=False, hints="shapes", solutions=False):
    """Write a workspace to ``directory`` (which must not exist, or be empty); returns its ``Workspace``.

    ``start``: begin at this exercise; ``only``: just these (names or numbers);
    ``forward``: forward bodies to write too; ``hints``: "none", "shapes" (the default: the
    docstrings with their shapes and the forward line each backward step undoes) or
    "formulas" (the backward formulas too); ``solutions``: the library's bodies instead of
    stubs (an answer key that grades all done).
    """
    directory = os.path.abspath(os.fspath(directory))
    exercises = catalog.select(start, only, forward)
    _check_free(directory)
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    if hints not in HINTS:
        raise ValueError(f"hints: expected one of {', '.join(HINTS)}, got {hints!r}")
    workspace = Workspace(directory, tuple(exercises), forward, hints, solutions, __version__)
    building = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(directory)}.")
    try:
        for name, text in learner_sources(exercises, forward, hints, solutions).items():
            atomic_write(os.path.join(building, os.path.basename(name)), lambda f, text=text: f.write(text),
                         mode="w")
        readme = workspace_readme(workspace)
        atomic_write(os.path.join(building, "README.md"), lambda f: f.write(readme), mode="w")
        write_json(os.path.join(building, MARKER), _marker(workspace))
        _usual_permissions(building)
        _check_free(directory)                  # still free: nothing appeared meanwhile
        os.rename(building, directory)          # fails rather than replace a non-empty directory
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return workspace


def _usual_permissions(building):
    """Temporary files are private (0600, 0700); a workspace gets what the umask gives."""
    umask = os.umask(0o022)
    os.umask(umask)
    os.chmod(building, 0o777 & ~umask)
    for name in os.listdir(building):
        os.chmod(os.path.join(building, name), 0o666 & ~umask)


def _marker(workspace):
    return {"kind": KIND, "format": FORMAT, "npformer": workspace.version,
            "exercises": [e.name for e in workspace.exercises], "forward": workspace.forward,
            "hints": workspace.hints, "solutions": workspace.solutions,
            "files": list(workspace.files)}


def load_workspace(directory):
    """The ``Workspace`` in ``directory``; ``WorkspaceError`` if it is not one."""
    directory = os.path.abspath(os.fspath(directory))
    marker = os.path.join(directory, MARKER)
    hint = "create one with `npformer exercises DIR`"
    if os.path.islink(directory):
        raise WorkspaceError(f"DIR: {directory} is a link to {os.path.realpath(directory)}: refused "
                             f"(grade the folder itself)")
    if not os.path.isdir(directory):
        raise WorkspaceError(f"DIR: {directory} is not a directory; {hint}")
    if not os.path.lexists(marker):
        raise WorkspaceError(f"DIR: {directory} is not an npformer exercise workspace (no {MARKER}); {hint}")
    try:
        data = json.loads(read_regular(marker, 1 << 16).decode("utf-8"))
    except (OSError, ValueError, RecursionError) as error:     # a WorkspaceError is a ValueError
        raise WorkspaceError(f"DIR: cannot read {marker} ({str(error)[:200]})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND or data.get("format") != FORMAT:
        raise WorkspaceError(f"DIR: {marker} is not the marker of an npformer exercise workspace "
                             f"(format {FORMAT} expected)")
    try:
        # a former name maps to the exercise it joined ("multi-head" to attention): once each
        exercises = tuple(dict.fromkeys(catalog.exercise_named(name) for name in data["exercises"]))
        hints = data["hints"]
        if isinstance(hints, bool):           # workspaces written before the tiers
            hints = "formulas" if hints else "none"
        return Workspace(directory, exercises, bool(data["forward"]), str(hints),
                         bool(data.get("solutions", False)), str(data["npformer"]))
    except (KeyError, TypeError, ValueError) as error:
        raise WorkspaceError(f"DIR: {marker} is damaged ({error})") from None
