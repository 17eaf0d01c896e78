"""Grading a workspace: each exercise in its own process, against a copy of npformer with
the learner's files in place.

What can be known without running anything is decided here: a file that does not
compile, a function still holding its stub (not started), an exercise whose
prerequisites are still stubs (blocked). Everything else runs in
``npformer.exercises.runner`` with a timeout, so a learner's crash or endless loop ends
that exercise's report, never the grader.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

from .. import __version__
from . import catalog
from .report import describe_run, format_outcome, progress_table
from .stubs import stub_state
from .workspace import WorkspaceError, library_dir, load_workspace

LEARNER = "npformer_learner"        # the package name of the learner's copy of npformer


@dataclass
class Outcome:
    """The verdict on one exercise and the lines that explain it."""

    exercise: catalog.Exercise
    status: str                          # "not started" | "failing" | "blocked" | "done"
    lines: list = field(default_factory=list)

    @property
    def done(self):
        """True when the exercise passed every check and claim."""
        return self.status == "done"


@dataclass
class Learner:
    """What the grader reads from a workspace before running anything."""

    workspace: object
    broken: dict                          # file name -> "file.py:12: SyntaxError: ..." (or missing)
    states: dict                          # "file.py:qualname" -> "stub" | "written" | "missing"


def read_learner(workspace):
    """Compile every file of the workspace; note each exercise function's stub state."""
    broken, states = {}, {}
    for name in workspace.files:
        wanted = [spec for e in workspace.exercises for spec in e.functions(workspace.forward)
                  if spec.startswith(name + ":")]
        try:
            with open(workspace.path(name), encoding="utf-8") as f:
                source = f.read()
            compile(source, workspace.path(name), "exec")
            found = stub_state(source, [spec.split(":")[1] for spec in wanted])
            states.update({spec: found[spec.split(":")[1]] for spec in wanted})
        except FileNotFoundError:
            broken[name] = f"{name} is missing from the workspace (copy it from a fresh workspace)"
        except (SyntaxError, ValueError, UnicodeDecodeError) as error:
            line = getattr(error, "lineno", None)
            broken[name] = f"{name}:{line}: {type(error).__name__}: {getattr(error, 'msg', error)}"
    return Learner(workspace, broken, states)


def prerequisites(exercise, present):
    """The exercises ``exercise`` runs the code of (transitively), among the names in ``present``."""
    seen, todo = set(), list(exercise.builds_on)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(catalog.BY_NAME[name].builds_on)
    return [e for e in catalog.EXERCISES if e.name in seen & set(present)]


def _waiting(exercise, learner):
    """[(prerequisite, its functions still stubs)] of the prerequisites not finished."""
    forward = learner.workspace.forward
    present = {e.name for e in learner.workspace.exercises}
    found = [(e, [s.split(":")[1] for s in e.functions(forward) if learner.states[s] == "stub"])
             for e in prerequisites(exercise, present)]
    return [(e, stubs) for e, stubs in found if stubs]


def waiting_line(waiting):
    """ "waiting for 03 linear (Linear.backward still a stub)", shortened when many wait."""
    if len(waiting) > 2:
        return f"waiting for {', '.join(e.label for e, _ in waiting)} (still stubs)"
    return "waiting for " + "; ".join(f"{e.label} ({', '.join(stubs)} still a stub)" for e, stubs in waiting)


def static_outcome(exercise, learner):
    """The outcome decided without running, or None when the exercise must run."""
    forward = learner.workspace.forward
    own = exercise.functions(forward)
    for name in exercise.files(forward):
        if name in learner.broken:
            return Outcome(exercise, "failing", [learner.broken[name]])
    if learner.broken:
        first = next(iter(learner.broken.values()))
        return Outcome(exercise, "blocked", [f"npformer cannot import your files: {first}"])
    waiting = _waiting(exercise, learner)
    untouched = all(learner.states[spec] == "stub" for spec in own) if own else \
        bool(waiting) and all(len(stubs) == len(e.functions(forward)) for e, stubs in waiting)
    if untouched:
        return Outcome(exercise, "not started", [waiting_line(waiting)] if not own else [])
    missing = [spec for spec in own if learner.states[spec] == "missing"]
    if missing:
        return Outcome(exercise, "failing", [f"{spec.replace(':', ': no function ')} (keep the names "
                                             f"and signatures of the workspace)" for spec in missing])
    if waiting:
        return Outcome(exercise, "blocked", [waiting_line(waiting)])
    return None


def build_overlay(root, learner):
    """``root/npformer_learner``: the library's package with the learner's files in place and no
    fast twins (the workspace files are plain maths without ``@fast_twin``)."""
    package = os.path.join(root, LEARNER)
    shutil.copytree(library_dir(), package, ignore=shutil.ignore_patterns("__pycache__", "exercises"))
    # the twins stay on disk but nothing imports them, so none registers; the thread pool
    # and memory helpers that training uses stay importable
    with open(os.path.join(package, "fast", "__init__.py"), "w", encoding="utf-8") as f:
        f.write('"""No fast twins while grading: every function runs its plain maths."""\n'
                'from .parallel import available_cores, cores, on_cores, use_cores  # noqa: F401\n')
    for name in learner.workspace.files:
        shutil.copyfile(learner.workspace.path(name), os.path.join(package, name))


def shown_paths(text, root, files, directory):
    """``text`` with the grading copy's paths replaced: the learner's files by their workspace
    paths, the library's by ``npformer/...``."""
    package = os.path.join(root, LEARNER) + os.sep
    for name in files:
        text = text.replace(package + name, os.path.join(directory, os.path.basename(name)))
    return text.replace(package, "npformer" + os.sep)


def _tail(path, limit=16384):
    """The last ``limit`` bytes of a file, as text (a learner may print a lot)."""
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - limit))
        return f.read().decode("utf-8", errors="replace")


def run_exercise(root, exercise, files, timeout, directory):
    """(result dict or None, exit code or "timeout", the end of its output) of one runner process."""
    result_path = os.path.join(root, f"{exercise.name}.json")
    log_path = os.path.join(root, f"{exercise.name}.log")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.path.dirname(library_dir())]),
           "NPFORMER_TRACK": "plain", "PYTHONIOENCODING": "utf-8"}
    command = [sys.executable, "-m", "npformer.exercises.runner", root, exercise.name,
               ",".join(files), result_path]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)       # the runner and anything it started
            process.wait()
            code = "timeout"
    output = shown_paths(_tail(log_path), root, files, directory)
    result = None
    if os.path.exists(result_path):
        with open(result_path, encoding="utf-8") as f:
            result = json.load(f)
    return result, code, output


def choose(workspace, names):
    """The exercises to grade: ``names`` (names or numbers) of the workspace, or all of it."""
    if not names:
        return list(workspace.exercises)
    chosen = [catalog.find(name) for name in names]
    for exercise in chosen:
        if exercise not in workspace.exercises:
            raise WorkspaceError(f"EXERCISE: {exercise.label} is not part of this workspace, which holds "
                                 f"{', '.join(e.name for e in workspace.exercises)}")
    return sorted(set(chosen), key=lambda e: e.number)


def grade(directory, names=(), timeout=120.0, out=print):
    """Grade the workspace in ``directory`` (all its exercises, or ``names``); print each
    report and a progress table through ``out``; return the list of ``Outcome``."""
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"timeout: expected a positive number of seconds, got {timeout!r}")
    workspace = load_workspace(directory)
    selected = choose(workspace, names)
    if workspace.version != __version__:
        out(f"note: this workspace was written by npformer {workspace.version}; grading with {__version__}")
    learner = read_learner(workspace)
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="npformer-grade-") as root:
        overlaid = False
        for exercise in selected:
            outcome = static_outcome(exercise, learner)
            if outcome is None:
                if not overlaid:
                    build_overlay(root, learner)
                    overlaid = True
                ran = run_exercise(root, exercise, workspace.files, timeout, workspace.directory)
                status, lines = describe_run(exercise, *ran, timeout)
                outcome = Outcome(exercise, status, lines)
            outcomes.append(outcome)
            out(format_outcome(outcome))
    out(progress_table(outcomes, workspace.forward))
    return outcomes

