"""Grades one exercise inside its own process (``python -m npformer.exercises.runner``).

    python -m npformer.exercises.runner WORKSPACE EXERCISE --result-fd N [--together] [--timeout S]

The learner's functions for the exercise are taken from their files and patched into
npformer, everything else stays npformer's own (``--together``: the functions of every
exercise the training task builds on, for the last stage). Before the learner's files run,
``guard`` is installed (npformer's own graded functions and files refuse the learner's
code) and the grader's engine is fingerprinted; after judging, a changed engine is a
verdict of its own. The result goes as JSON down the pipe ``N``, never to a file; what the
learner's code prints goes to fd 1 and 2, which the grader reads with a cap.
"""
from __future__ import annotations

import faulthandler
import json
import os
import re
import sys
import traceback

from . import catalog
from .judging import judge_exercise

SHAPE_WORDS = ("matmul", "not aligned", "could not be broadcast", "mismatch in its core dimension")


def describe(error, workspace_dir):
    """A JSON-ready account of an exception: where in the learner's files, what, and a hint."""
    where = line = None
    for frame in traceback.extract_tb(error.__traceback__):
        if os.path.dirname(os.path.abspath(frame.filename)) == os.path.abspath(workspace_dir):
            where, line = f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}", frame.line
    if isinstance(error, SyntaxError) and error.filename:
        where, line = f"{os.path.basename(error.filename)}:{error.lineno}", (error.text or "").strip()
    message = f"{type(error).__name__}: {error}"
    stub = re.match(r"exercise (\d+)", str(error)) if isinstance(error, NotImplementedError) else None
    hint = None
    if any(word in str(error) for word in SHAPE_WORDS):
        hint = ("a shape mismatch: check each transpose (.T, .swapaxes(-1, -2)) and keepdims=True "
                "on sums and means")
    return {"where": where, "line": line, "message": message[:500],
            "stub": int(stub.group(1)) if stub else None, "hint": hint}


def learner_patches(workspace, specs):
    """{"npformer.<module>.<qualname>": the learner's function} for "file.py:qualname" specs."""
    from .learner import learner_functions
    by_file = {}
    for spec in specs:
        file, qualname = spec.split(":")
        by_file.setdefault(file, []).append(qualname)
    patches = {}
    for file, qualnames in by_file.items():
        path = workspace.path(file)
        with open(path, encoding="utf-8") as f:
            source = f.read()
        module = "npformer." + file[:-3].replace("/", ".")
        patches.update(learner_functions(source, module, qualnames, path))
    return patches


def specs_to_judge(workspace, exercise, together):
    """The learner's functions this run patches in: the exercise's, or (``together``) those of
    every exercise of the workspace that the training task builds on."""
    if not together:
        return exercise.functions(workspace.forward)
    names = set(exercise.builds_on) | {exercise.name}
    return [spec for e in workspace.exercises if e.name in names for spec in e.functions(workspace.forward)]


ENGINE = ("npformer.testing", "npformer.exercises", "numpy", "builtins")


def _contents(value):
    """What a container of the engine holds, by identity (a table of tolerances edited in place
    is a changed engine too)."""
    if isinstance(value, dict):
        return tuple((k, id(v)) for k, v in list(value.items()))
    if isinstance(value, (list, set, frozenset)):
        return tuple(sorted(id(v) for v in value)) if isinstance(value, (set, frozenset)) else \
            tuple(id(v) for v in value)
    return None


def fingerprint():
    """{(module, name): (object, code)} of the grader's engine: every module-level name of
    npformer.testing, npformer.exercises and numpy's top level, and the methods of their
    classes; the learner's code must leave it as it found it."""
    from . import guard
    seen = {}
    for module_name, module in list(sys.modules.items()):
        if module is None or not any(module_name == m or module_name.startswith(m + ".") for m in ENGINE[:2]) \
                and module_name not in ENGINE[2:]:
            continue
        for name, value in list(vars(module).items()):
            if module_name == "builtins" and name.startswith("_"):
                continue                       # _ is the last value at a prompt
            if module_name == guard.__name__ and name == "REFUSED":
                seen[(module_name, name)] = (value, None)       # it grows as refusals are made
                continue
            seen[(module_name, name)] = (value, getattr(value, "__code__", None) or _contents(value))
            if isinstance(value, type) and value.__module__ == module_name:
                for attr, member in list(vars(value).items()):
                    seen[(module_name, f"{name}.{attr}")] = (member, getattr(member, "__code__", None))
    return seen


def changed(before):
    """The names of the engine that differ from ``before`` (``fingerprint``'s)."""
    now = fingerprint()
    return sorted(f"{m}.{n}" for (m, n), (value, code) in before.items()
                  if (m, n) not in now or now[(m, n)][0] is not value or now[(m, n)][1] != code)


def main(argv=None):
    """Grade one exercise; send the result JSON down the pipe. Exit code 0 whatever the
    learner's code did."""
    argv = sys.argv[1:] if argv is None else argv
    directory, name = argv[:2]
    result_fd = int(argv[argv.index("--result-fd") + 1])
    together = "--together" in argv
    timeout = float(argv[argv.index("--timeout") + 1]) if "--timeout" in argv else None
    from . import guard
    from .workspace import load_workspace
    workspace, exercise = load_workspace(directory), catalog.find(name)
    channel = os.fdopen(result_fd, "w", encoding="utf-8")
    token = sys.stdin.readline().strip()      # the grader's secret: a result without it is not ours
    sys.stdin.close()
    sys.stdin = open(os.devnull, encoding="utf-8")
    judge, send = judge_exercise, json.dumps          # held here: the learner's code may rebind names
    if timeout:                              # the stack at the moment the grader would stop us
        stack = open("stack.txt", "w", encoding="utf-8")
        faulthandler.dump_traceback_later(max(timeout - 1.0, 0.5), exit=True, file=stack)
    if os.environ.get("NPFORMER_GRADE_EXAMPLES"):      # the teacher's (or a test's) number of draws
        from . import judging
        judging.EXAMPLES = int(os.environ["NPFORMER_GRADE_EXAMPLES"])
    specs = specs_to_judge(workspace, exercise, together)
    # training runs the learner's files together, and they call each other's functions through
    # npformer's names; each exercise was judged guarded on its own, so here only the hook runs
    graded = [] if together else [catalog.module_path(s) for s in specs]
    unguarded = guard.install(workspace.directory, os.getcwd(), graded)
    before = fingerprint()
    refused = {"exercise": name, "checks": [], "claims": []}      # the reason is in result["refused"]
    try:
        patches = learner_patches(workspace, specs)
    except guard.Refused:
        result = refused
    except Exception as error:           # their file does not even run: say where
        result = {"exercise": name, "checks": [], "claims": [], "import_failed": True,
                  "error": describe(error, workspace.directory)}
    else:
        try:
            result = judge(exercise, patches, progress="progress.txt")
        except guard.Refused:
            result = refused
    result["refused"] = list(dict.fromkeys(guard.REFUSED))
    result["engine_changed"] = changed(before)
    result["unguarded"] = unguarded
    result["token"] = token
    channel.write(send(result))
    channel.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
