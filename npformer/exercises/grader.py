"""Grading a workspace: each exercise alone, in its own process, then the learner's pieces together.

What can be known without running anything is decided here: a file that does not compile, a
function missing, an exercise whose functions are all still stubs (not started). Everything
else is judged by a judge process (``runner``, kept for the whole session) in a new learner's
process per exercise, with a timeout, with the learner's functions for that exercise patched
into npformer and npformer's own code for everything else: a mistake is reported once, against the exercise that holds it. The last
exercise, training, runs the learner's components together, and only once every exercise it
uses is done.
"""
from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, field

from .. import __version__
from ..testing.needs import require_hypothesis
from . import catalog
from .judges import Judge
from .sandbox import Limits
from .report import describe_run, format_outcome, next_step, progress_table
from .stubs import stub_state
from .workspace import WorkspaceError, load_workspace

SHOW_PROGRESS_AFTER = 3.0        # seconds a stage runs before the grader says what it is doing
JUDGE_SHARE, STARTUP = 2.0, 20.0    # the wall limit: this many timeouts and seconds to start two processes


@dataclass
class Outcome:
    """The verdict on one exercise and the lines that explain it."""

    exercise: catalog.Exercise
    status: str                          # "not started" | "failing" | "blocked" | "done" | "not graded"
    lines: list = field(default_factory=list)
    output: list = field(default_factory=list)   # what the learner's code printed (capped)
    first: str = ""                      # the first function to work on, for "next:"
    passed: int = 0                      # checks and claims that pass, of
    total: int = 0                       # all the checks and claims that ran

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
        path = workspace.path(name)
        if os.path.islink(path) or not _inside(path, workspace.directory):
            broken[name] = (f"{os.path.basename(name)} is a link to {os.path.realpath(path)}, outside the "
                            f"workspace: refused (keep your own file there)")
            continue
        try:
            with open(path, encoding="utf-8") as f:
                source = f.read()
            compile(source, workspace.path(name), "exec")
            found = stub_state(source, [spec.split(":")[1] for spec in wanted])
            states.update({spec: found[spec.split(":")[1]] for spec in wanted})
        except FileNotFoundError:
            broken[name] = f"{os.path.basename(name)} is missing from the workspace (copy it from a fresh workspace)"
        except (SyntaxError, ValueError, UnicodeDecodeError) as error:
            line = getattr(error, "lineno", None)
            broken[name] = f"{os.path.basename(name)}:{line}: {type(error).__name__}: {getattr(error, 'msg', error)}"
    return Learner(workspace, broken, states)


def _inside(path, directory):
    """True when ``path``, links resolved, is inside ``directory``."""
    real, root = os.path.realpath(path), os.path.realpath(directory)
    return real.startswith(root + os.sep)


def _first_stub(exercise, learner):
    """ "softmax_backward in t03_softmax.py": the first function of the exercise to write."""
    forward = learner.workspace.forward
    specs = exercise.functions(forward)
    todo = [s for s in specs if learner.states.get(s) != "written"] or list(specs)
    if not todo:
        return ""
    file, qualname = todo[0].split(":")
    return f"{qualname} in {os.path.basename(file)}"


def _named_function(exercise, result):
    """ "LayerKV.write in t13_kv_cache.py": where the first mistake the grader named is, or ""."""
    if not result or result.get("import_failed"):
        return ""
    named = [c["mistake"]["function"] for c in result["checks"] + result["claims"]
             if not c["ok"] and c.get("mistake")]
    for spec in exercise.functions(forward=True):
        file, qualname = spec.split(":")
        if named and qualname == named[0]:
            return f"{qualname} in {os.path.basename(file)}"
    return ""


def _failing_function(exercise, result):
    """ "gelu_tanh_backward in t06_activations.py": the function behind the first failing
    drawn check when no mistake is named (its backward, or its forward for an output), or ""."""
    from ..testing.components import find
    if not result or result.get("import_failed"):
        return ""
    failing = [c for c in result["checks"] if not c["ok"] and "component" in c]
    if not failing:
        return ""
    try:
        forward, backward = find(failing[0]["component"]).reference[:2]
    except (KeyError, ValueError):
        return ""
    wanted = forward if failing[0]["kind"] == "output" else backward
    for spec in exercise.functions(forward=True):
        file, qualname = spec.split(":")
        if isinstance(wanted, str) and wanted == f"{file[:-3].replace('/', '.')}.{qualname}":
            return f"{qualname} in {os.path.basename(file)}"
    return ""


def static_outcome(exercise, learner):
    """The outcome decided without running, or None when the exercise must run."""
    forward = learner.workspace.forward
    own = exercise.functions(forward)
    first = _first_stub(exercise, learner)
    for name in exercise.files(forward):
        if name in learner.broken:
            return Outcome(exercise, "failing", [learner.broken[name]], first=first)
    if own and all(learner.states[spec] == "stub" for spec in own):
        return Outcome(exercise, "not started", first=first)
    missing = [spec for spec in own if learner.states[spec] == "missing"]
    if missing:
        return Outcome(exercise, "failing", [f"{spec.split(':')[1]}: no such function in "
                                             f"{os.path.basename(spec.split(':')[0])} (keep the names "
                                             f"and signatures of the workspace)" for spec in missing],
                       first=first)
    return None


def blocked_by(exercise, outcomes):
    """A line "blocked by 01 softmax (failing)" when an exercise the training task uses is not
    done, else None."""
    waiting = [o for o in outcomes if o.exercise.name in exercise.builds_on and not o.done]
    if not waiting:
        return None
    return "blocked by " + ", ".join(f"{o.exercise.label} ({o.status})" for o in waiting)


def _read_stack(path, directory):
    """ "softmax_backward (t03_softmax.py:52)": where the learner's code was when stopped."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("File ") and os.path.abspath(directory) in line:
                path_part, _, rest = line[len('File "'):].partition('", line ')
                number, _, function = rest.partition(" in ")
                return f"{function} ({os.path.basename(path_part)}:{number})"
    return None


def run_exercise(root, workspace, exercise, timeout, together=False, say=None, limits=None, judge=None):
    """(result dict or None, exit code or "timeout", printed lines, where it stopped), judged by
    ``judge`` (a ``judges.Judge``; a new one for this exercise when None)."""
    scratch = tempfile.mkdtemp(prefix=f"{exercise.name}{'-together' if together else ''}-", dir=root)
    limits = limits or Limits()
    # the learner's process stops itself after ``timeout`` seconds of its own computing; the
    # wall limit is the backstop for the job (the judge's work comes on top)
    limits = Limits(**{**limits.__dict__, "wall": JUDGE_SHARE * timeout + STARTUP})
    shown = []

    def waiting(elapsed):
        progress = os.path.join(scratch, "progress.txt")
        if say is not None and elapsed > SHOW_PROGRESS_AFTER and os.path.exists(progress):
            with open(progress, encoding="utf-8", errors="replace") as f:
                stage = f.read().strip()[:200]
            if stage and stage not in shown[-1:]:
                say(f"  {exercise.label}: {stage} ...")
                shown.append(stage)
    job = {"workspace": workspace.directory, "exercise": exercise.name, "together": together,
           "timeout": timeout, "scratch": scratch, "limits": dict(limits.__dict__)}
    own = judge is None
    judge = judge or Judge(root)
    try:
        reply = judge.judge(job, limits.wall, on_wait=waiting)
    finally:
        if own:
            judge.close()
    if reply.get("judge_failed"):
        return None, "judge failed", reply["judge_failed"].splitlines(), None
    code = reply["code"]
    stopped = _read_stack(os.path.join(scratch, "learner", "stack.txt"), workspace.directory) \
        if code in ("timeout", 1) else None
    if stopped is not None:
        code = "timeout"
    printed = reply["output"].splitlines()
    if reply.get("dropped"):
        printed.append(f"... {reply['dropped']:,} more bytes")
    result = reply["result"]
    if result is not None and not (isinstance(result, dict) and isinstance(result.get("checks"), list)):
        result = None
    return result, code, printed, stopped


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


def grade(directory, names=(), timeout=120.0, out=print, show_output=False, say=None, limits=None,
          course=None, judge=None):
    """Grade the workspace in ``directory`` (all its exercises, or ``names``); print each report,
    a progress table and what to do next through ``out``; return the list of ``Outcome``.
    ``say`` (default: stderr) receives the progress of stages that take a while; ``limits``
    (``sandbox.Limits``) bound each graded process; ``course`` (``course.Course``, the
    teacher's) gives the exercise list instead of the workspace's own marker file; ``judge``
    (``judges.Judge``, a class's) judges them, else one started for this workspace."""
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"timeout: expected a positive number of seconds, got {timeout!r}")
    workspace = load_workspace(directory)
    notes = []
    if course is not None:
        workspace, notes = course.applied_to(workspace)
    selected = choose(workspace, names)
    require_hypothesis("npformer grade")     # before any exercise runs: its absence is no learner's fault
    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    if workspace.version != __version__:
        out(f"note: this workspace was written by npformer {workspace.version}; grading with {__version__}")
    for note in notes:
        out(f"note: {note}")
    learner = read_learner(workspace)
    needed = _with_prerequisites(selected, workspace)
    outcomes = {}
    with tempfile.TemporaryDirectory(prefix="npformer-grade-") as root:
        own = judge is None
        judge = judge or Judge(root)
        try:
            for exercise in needed:
                outcome = _grade_one(root, learner, exercise, list(outcomes.values()), timeout, show_output,
                                     say, limits, judge)
                outcomes[exercise.name] = outcome
                if exercise in selected:
                    out(format_outcome(outcome))
        finally:
            if own:
                judge.close()
    shown = [outcomes[e.name] for e in selected]
    out(progress_table(shown, workspace.forward))
    out(next_step(shown))
    return shown


def _with_prerequisites(selected, workspace):
    """``selected`` and, for the training task, the exercises it builds on (graded first)."""
    names = {e.name for e in selected}
    for exercise in selected:
        names |= set(exercise.builds_on) & {e.name for e in workspace.exercises}
    return [e for e in workspace.exercises if e.name in names]


def _grade_one(root, learner, exercise, before, timeout, show_output, say, limits=None, judge=None):
    outcome = static_outcome(exercise, learner)
    if outcome is not None:
        return outcome
    together = bool(exercise.builds_on)
    if together:
        waiting = blocked_by(exercise, before)
        if waiting:
            return Outcome(exercise, "blocked", [waiting])
    ran = run_exercise(root, learner.workspace, exercise, timeout, together, say, limits, judge)
    if ran[1] == "judge failed":        # npformer's failure, not the learner's: said so, not counted
        return Outcome(exercise, "not graded", ["the grader itself failed here, twice (not your code): "
                                                "grade this exercise again"] + ran[2][:20])
    status, lines = describe_run(exercise, *ran, timeout, show_output)
    first = (_named_function(exercise, ran[0]) or _failing_function(exercise, ran[0])
             or _first_stub(exercise, learner))
    entries = (ran[0]["checks"] + ran[0]["claims"]) if ran[0] else []
    cheated = bool(ran[0] and (ran[0].get("refused") or ran[0].get("engine_changed")))
    passed = 0 if cheated else sum(bool(e.get("ok")) for e in entries)
    return Outcome(exercise, status, lines, output=ran[2], first=first, passed=passed, total=len(entries))
