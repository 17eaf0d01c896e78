"""Grades one exercise inside its own process (``python -m npformer.exercises.runner``).

    python -m npformer.exercises.runner WORKSPACE EXERCISE RESULT_JSON [--together] [--timeout S]

The learner's functions for the exercise are taken from their files and patched into
npformer, everything else stays npformer's own (``--together``: the functions of every
exercise the training task builds on, for the last stage). The result is written as JSON;
whatever the learner's code does (print, raise, loop), the grader only reads that file, the
exit code, the captured output and, on a timeout, the stack at that moment.
"""
from __future__ import annotations

import faulthandler
import os
import re
import sys
import traceback

from ..files.fileio import write_json
from . import catalog
from .judging import judge_exercise
from .output import capture_output

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
    from ..testing.patching import learner_functions
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


def main(argv=None):
    """Grade one exercise; write the result JSON. Exit code 0 whatever the learner's code did."""
    argv = sys.argv[1:] if argv is None else argv
    directory, name, out_path = argv[:3]
    together = "--together" in argv
    timeout = float(argv[argv.index("--timeout") + 1]) if "--timeout" in argv else None
    from .workspace import load_workspace
    workspace, exercise = load_workspace(directory), catalog.find(name)
    if timeout:                              # the stack at the moment the grader would stop us
        stack = open(out_path + ".stack", "w", encoding="utf-8")
        faulthandler.dump_traceback_later(max(timeout - 1.0, 0.5), exit=True, file=stack)
    with capture_output(out_path + ".out"):
        try:
            patches = learner_patches(workspace, specs_to_judge(workspace, exercise, together))
        except Exception as error:           # their file does not even run: say where
            result = {"exercise": name, "checks": [], "claims": [], "import_failed": True,
                      "error": describe(error, workspace.directory)}
        else:
            result = judge_exercise(exercise, patches, progress=out_path + ".progress")
    write_json(out_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
