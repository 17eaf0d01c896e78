"""Grading a workspace: each exercise alone, in its own process, then the learner's pieces together.

What can be known without running anything is decided here: a file that does not compile, a
function missing, an exercise whose functions are all still stubs (not started). Everything
else is judged here, in this process, through a learner's process per exercise in the
submission's sandbox (``session``): the learner's functions for that exercise run with
npformer's own code for everything else, so a mistake is reported once, against the exercise
that holds it. The last exercise, training, runs the learner's components together, and only
once every exercise it uses is done.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field

from .. import __version__
from ..testing.needs import require_hypothesis
from . import catalog
from .grading_build import shared_build
from .learner_process import addresses_to_judge
from .feedback import describe_run, format_outcome, next_step, progress_table
from .safe_text import shown
from .walls.bubblewrap import TIMEOUT as DEFAULT_TIMEOUT
from .walls.bubblewrap import Limits, detect
from .walls.sandbox import Sandbox
from .stubs import functions_by_qualname, stub_state
from .workspace import WorkspaceError, load_workspace, read_regular

SHOW_PROGRESS_AFTER = 3.0        # seconds an exercise runs before the grader says what it is doing
JUDGE_SHARE, STARTUP = 2.0, 20.0    # the wall limit: this many timeouts, and seconds to spare


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
    mistake: str = ""                    # the catalogued mistake the report names first, if any

    @property
    def done(self):
        """True when the exercise passed every check and claim."""
        return self.status == "done"


@dataclass
class Submission:
    """What the grader reads from a workspace before running anything."""

    workspace: object
    broken: dict                          # file name -> "file.py:12: SyntaxError: ..." (or missing)
    states: dict                          # "file.py:qualname" -> "stub" | "written" | "missing"
    sources: dict                         # file name -> its bytes, as read (what the sandbox sees)


UNREADABLE = (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError, OverflowError)


def read_submission(workspace):
    """Read every file of the workspace (regular files of bounded size only), compile it, note
    each exercise function's stub state. Nothing of the learner's runs here."""
    broken, states, sources = {}, {}, {}
    for name in workspace.files:
        wanted = [address for e in workspace.exercises for address in e.functions(workspace.forward)
                  if address.startswith(name + ":")]
        path = workspace.path(name)
        try:
            data = read_regular(path)
            source = data.decode("utf-8")
            compile(source, path, "exec", dont_inherit=True)
            found = stub_state(source, [address.split(":")[1] for address in wanted])
            states.update({address: found[address.split(":")[1]] for address in wanted})
            sources[name] = data
        except FileNotFoundError:
            broken[name] = f"{os.path.basename(name)} is missing from the workspace (copy it from a fresh workspace)"
        except WorkspaceError as error:
            broken[name] = str(error)
        except UNREADABLE as error:
            line = getattr(error, "lineno", None)
            said = getattr(error, "msg", None) or str(error)[:200] or "too deeply nested to read"
            broken[name] = f"{os.path.basename(name)}:{line}: {type(error).__name__}: {said}"
    return Submission(workspace, broken, states, sources)


def copied(submission, directory):
    """Write the files ``submission`` read into ``directory`` (a new folder), readable by the
    sandbox's user: what the learner's processes see, never the workspace itself."""
    os.makedirs(directory, mode=0o755)
    os.chmod(directory, 0o755)
    for name, data in submission.sources.items():
        path = os.path.join(directory, os.path.basename(name))
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o644)
    return directory


def _first_stub(exercise, submission):
    """ "softmax_backward in t03_softmax.py": the first function of the exercise to write."""
    forward = submission.workspace.forward
    addresses = exercise.functions(forward)
    todo = [s for s in addresses if submission.states.get(s) != "written"] or list(addresses)
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
    for address in exercise.functions(forward=True):
        file, qualname = address.split(":")
        if named and qualname == named[0]:
            return f"{qualname} in {os.path.basename(file)}"
    return ""


def _failing_function(exercise, result, sources=None):
    """ "gelu_tanh_backward in t06_activations.py": where to look when no mistake is named: the
    function behind the first failing drawn check (its backward, or its forward for an output),
    else the function of theirs an error was raised in (``sources``: {file: bytes} of the
    workspace, to find the def holding the line), else the one a failing fixed case is named
    after ("Embedding (case 0)": Embedding's backward), or ""."""
    if not result or result.get("import_failed"):
        return ""
    failing = [c for c in result["checks"] if not c["ok"]]
    addresses = exercise.functions(forward=True)
    found = _drawn_function(failing, addresses) or _raising_function(failing + [c for c in result["claims"]
                                                                            if not c["ok"]], addresses, sources) \
        or _case_function(failing, exercise)
    if not found:
        return ""
    file, qualname = found.split(":")
    return f"{qualname} in {os.path.basename(file)}"


def _drawn_function(failing, addresses):
    from ..testing.components import component_named
    drawn = [c for c in failing if "component" in c]
    if not drawn:
        return ""
    try:
        forward, backward = component_named(drawn[0]["component"]).reference[:2]
    except (KeyError, ValueError):
        return ""
    wanted = forward if drawn[0]["kind"] == "output" else backward
    return next((address for address in addresses if isinstance(wanted, str) and wanted == _path(address)), "")


def _path(address):
    file, qualname = address.split(":")
    return f"{file[:-3].replace('/', '.')}.{qualname}"


RAISED_AT = re.compile(r"\(in ([\w.]+\.py):(\d+), (\w+)\)")


def _raising_function(failing, addresses, sources):
    """The address whose def holds the line an error names ("(in t10_model.py:250, backward)")."""
    import ast
    for entry in failing:
        said = RAISED_AT.search(str(entry.get("error") or entry.get("message") or entry.get("detail") or ""))
        if not said:
            continue
        file, line, name = said.group(1), int(said.group(2)), said.group(3)
        here = [address for address in addresses if os.path.basename(address.split(":")[0]) == file]
        source = next((data for key, data in (sources or {}).items() if os.path.basename(key) == file), None)
        if source is not None:
            try:
                tree = ast.parse(source)
            except (SyntaxError, ValueError):
                tree = None
            for address in here if tree is not None else ():
                node = functions_by_qualname(tree).get(address.split(":")[1])
                if node is not None and node.lineno <= line <= node.end_lineno:
                    return address
        named = [address for address in here if address.split(":")[1].rsplit(".", 1)[-1] == name]
        if len(named) == 1:
            return named[0]
    return ""


def _case_function(failing, exercise):
    """The backward a failing fixed case is named after: "Embedding (padding row)" is
    Embedding's, "swiglu_gate" swiglu_gate_backward's (its forward when an output differs)."""
    for entry in failing:
        if "case" not in entry:
            continue
        base = entry["case"].split(" (")[0]
        output = any(t["name"].startswith("output") for t in entry.get("tensors") or [])
        for address in exercise.forward if output else exercise.backward:
            qualname = address.split(":")[1]
            if qualname.split(".")[0] == base or qualname.startswith(base + "_"):
                return address
    return ""


def static_outcome(exercise, submission):
    """The outcome decided without running, or None when the exercise must run."""
    forward = submission.workspace.forward
    own = exercise.functions(forward)
    first = _first_stub(exercise, submission)
    for name in exercise.files(forward):
        if name in submission.broken:
            return Outcome(exercise, "failing", [submission.broken[name]], first=first)
    if own and all(submission.states[address] == "stub" for address in own):
        return Outcome(exercise, "not started", first=first)
    missing = [address for address in own if submission.states[address] == "missing"]
    if missing:
        return Outcome(exercise, "failing", [f"{address.split(':')[1]}: no such function in "
                                             f"{os.path.basename(address.split(':')[0])} (keep the names "
                                             f"and signatures of the workspace)" for address in missing],
                       first=first)
    return None


def blocked_by(exercise, outcomes):
    """A line "blocked by 01 softmax (failing)" when an exercise the training task uses is not
    done, else None."""
    waiting = [o for o in outcomes if o.exercise.name in exercise.builds_on and not o.done]
    if not waiting:
        return None
    return "blocked by " + ", ".join(f"{o.exercise.label} ({o.status})" for o in waiting)


def run_exercise(sandbox, workspace, exercise, timeout, together=False, say=None, limits=None, addresses=None):
    """(result dict or None, exit code or "timeout" or "judge failed", printed lines, where it
    stopped), judged in ``sandbox`` (``session.Sandbox``) with the learner's ``addresses`` (all the
    exercise's, or the training task's, by default). A failure of the grader's own (the sandbox
    would not start, the judging raised) is tried once more in a new sandbox."""
    from .session import judge_in
    limits = limits or Limits()
    # the learner's process stops itself after ``timeout`` seconds of its own computing; the
    # wall limit is the backstop (the judge's work comes on top)
    limits = Limits(**{**limits.__dict__, "wall": JUDGE_SHARE * timeout + STARTUP})
    addresses = addresses_to_judge(workspace, exercise, together) if addresses is None else addresses
    shown, began = [], time.monotonic()

    def progress(stage):
        if say is not None and time.monotonic() - began > SHOW_PROGRESS_AFTER and stage not in shown[-1:]:
            say(f"  {exercise.label}: {stage[:200]} ...")
            shown.append(stage)
    failure = ""
    for _ in range(2):
        try:
            reply = judge_in(sandbox, exercise, addresses, timeout, limits, progress)
            break
        except Exception:                     # noqa: BLE001 - npformer's failure, said as such
            import traceback
            failure = traceback.format_exc()[-2000:] + sandbox.tail()[-2000:]
            sandbox.close()                   # a new sandbox for the second try
    else:
        return None, "judge failed", failure.splitlines(), None
    printed = reply["output"].splitlines()
    if reply.get("dropped"):
        printed.append(f"... {reply['dropped']:,} more bytes")
    return reply["result"], reply["code"], printed, reply["stopped"]


def choose(workspace, names):
    """The exercises to grade: ``names`` (names or numbers) of the workspace, or all of it."""
    if not names:
        return list(workspace.exercises)
    chosen = [catalog.exercise_named(name) for name in names]
    for exercise in chosen:
        if exercise not in workspace.exercises:
            raise WorkspaceError(f"EXERCISE: {exercise.label} is not part of this workspace, which holds "
                                 f"{', '.join(e.name for e in workspace.exercises)}")
    return sorted(set(chosen), key=lambda e: e.number)


def grade(directory, names=(), timeout=DEFAULT_TIMEOUT, out=print, show_output=False, say=None, limits=None,
          course=None, build=None, isolation=None):
    """Grade the workspace in ``directory`` (all its exercises, or ``names``); print the isolation
    in force, each report, a progress table and what to do next through ``out``; return the list
    of ``Outcome``. ``say`` (default: stderr) receives the progress of stages that take a while;
    ``limits`` (``sandbox.Limits``) bound each learner's process; ``course`` (``course.Course``,
    the teacher's) gives the exercise list instead of the workspace's own marker file;
    ``build`` is the hand-out build to grade against (``grading_build``; this process's own by
    default); ``isolation`` (``sandbox.detect()``'s by default) the walls."""
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"timeout: expected a positive number of seconds, got {timeout!r}")
    workspace = load_workspace(directory)
    notes = []
    if course is not None:
        workspace, notes = course.applied_to(workspace)
    selected = choose(workspace, names)
    require_hypothesis("npformer grade")     # before any exercise runs: its absence is no learner's fault
    say = say or (lambda text: print(shown(text), file=sys.stderr, flush=True))
    out = _shown_through(out)
    isolation = isolation or detect()
    out(isolation.line())
    if workspace.version != __version__:
        out(f"note: this workspace was written by npformer {workspace.version}; grading with {__version__}")
    for note in notes:
        out(f"note: {note}")
    submission = read_submission(workspace)
    needed = _with_prerequisites(selected, workspace)
    outcomes = {}
    substitute = course is not None and course.when_blocked != "no points"
    with tempfile.TemporaryDirectory(prefix="npformer-submission-") as private_folder, \
            Sandbox(copied(submission, os.path.join(private_folder, "files")), build or shared_build(),
                    isolation, limits) as sandbox:
        for exercise in needed:
            outcome = _grade_one(sandbox, submission, exercise, list(outcomes.values()), timeout, show_output,
                                 say, limits, substitute)
            outcomes[exercise.name] = outcome
            if exercise in selected:
                out(format_outcome(outcome))
    chosen = [outcomes[e.name] for e in selected]
    out(progress_table(chosen, workspace.forward))
    out(next_step(chosen))
    return chosen


def _shown_through(out):
    """``out`` with every text made safe to show first (``safe_text.shown``)."""
    return lambda text: out(shown(text))


def _with_prerequisites(selected, workspace):
    """``selected`` and, for the training task, the exercises it builds on (graded first)."""
    names = {e.name for e in selected}
    for exercise in selected:
        names |= set(exercise.builds_on) & {e.name for e in workspace.exercises}
    return [e for e in workspace.exercises if e.name in names]


def _grade_one(sandbox, submission, exercise, before, timeout, show_output, say, limits=None, substitute=False):
    outcome = static_outcome(exercise, submission)
    if outcome is not None:
        return outcome
    together, addresses, note = bool(exercise.builds_on), None, []
    if together:
        waiting = blocked_by(exercise, before)
        if waiting and not substitute:
            return Outcome(exercise, "blocked", [waiting])
        if waiting:                       # the course's choice: npformer's code for the failing ones
            failing = {o.exercise.name for o in before if o.exercise.name in exercise.builds_on and not o.done}
            workspace = submission.workspace
            addresses = [s for e in workspace.exercises if e.name in set(exercise.builds_on) - failing
                     for s in e.functions(workspace.forward)]
            note = [f"graded with npformer's own code in place of {waiting[len('blocked by '):]}"]
    ran = run_exercise(sandbox, submission.workspace, exercise, timeout, together, say, limits, addresses)
    if ran[1] == "judge failed":        # npformer's failure, not the learner's: said so, not counted
        return Outcome(exercise, "not graded", ["the grader itself failed here, twice (not your code): "
                                                "grade this exercise again"] + ran[2][:20])
    status, lines = describe_run(exercise, *ran, timeout, show_output)
    lines = note + lines
    first = (_named_function(exercise, ran[0]) or _failing_function(exercise, ran[0], submission.sources)
             or _first_stub(exercise, submission))
    entries = (ran[0]["checks"] + ran[0]["claims"]) if ran[0] else []
    cheated = bool(ran[0] and ran[0].get("refused"))
    passed = 0 if cheated else sum(bool(e.get("ok")) and e.get("verified", True) for e in entries)
    named = [e["mistake"]["name"] for e in entries if not e.get("ok") and e.get("mistake")]
    return Outcome(exercise, status, lines, output=ran[2], first=first, passed=passed, total=len(entries),
                   mistake=named[0] if named else "")
