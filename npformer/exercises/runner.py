"""Grades one exercise inside its own process (``python -m npformer.exercises.runner``).

The grader starts it with a temporary directory on ``PYTHONPATH`` holding
``npformer_learner``: a copy of npformer with the learner's files in place. Every
check builds the same problem twice, from the learner's package and from the library
(``npformer``, on the plain track), and compares. The result is written as JSON to the
path given; whatever the learner's code does (print, raise, loop), the grader process
only reads that file, the exit code and the captured output.

    python -m npformer.exercises.runner ROOT EXERCISE FILES RESULT_JSON
"""
from __future__ import annotations

import importlib
import os
import re
import sys
import traceback

import numpy as np

from ..files.fileio import write_json
from . import catalog, claims, compare
from .grader import LEARNER
SHAPE_WORDS = ("matmul", "not aligned", "could not be broadcast", "mismatch in its core dimension")


def describe(error, root, files):
    """A JSON-ready account of an exception: where in the learner's files, what, and a hint."""
    package = os.path.join(os.path.abspath(root), LEARNER)
    where = line = None
    for frame in traceback.extract_tb(error.__traceback__):
        path = os.path.relpath(os.path.abspath(frame.filename), package)
        if path in files:
            where, line = f"{os.path.basename(path)}:{frame.lineno} in {frame.name}", frame.line
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


def check_case(case, size, learner, reference):
    """One gradient-check case at one size: forward, every gradient, accumulation, finite differences."""
    mine = compare.Problem(*learner.testing.cases.CASES[case](np.random.default_rng(size), size))
    right = compare.Problem(*reference.testing.cases.CASES[case](np.random.default_rng(size), size))
    result = {"case": case, "size": size, "ok": False, "tensors": [], "notes": []}
    out, _ = mine.forward()
    expected, _ = right.forward()
    if np.shape(out) != np.shape(expected):
        result["forward"] = f"forward output has shape {np.shape(out)}, expected {np.shape(expected)}"
        return result
    error, worst = compare.relative_error(np.asarray(out, np.float64), np.asarray(expected, np.float64))
    if error > compare.MATCH_TOL:
        result["forward"] = (f"forward output differs: relative error {error:.2e} at {worst} "
                             f"(yours {np.asarray(out)[worst]:.6g}, expected {np.asarray(expected)[worst]:.6g})")
        return result
    G = right.upstream_for(expected)
    grads, reference_grads = mine.gradients(G), right.gradients(G)
    factors = compare.named_factors(case, right)
    for name, wanted in reference_grads.items():
        found = compare.compare_tensor(name, grads.get(name), np.asarray(wanted, np.float64), factors)
        if found is not None:
            if name in mine.names and not found["diagnoses"]:
                found["diagnoses"] = [d for d in [compare.leak(mine, right, G, name)] if d]
            result["tensors"].append(found)
    accumulated = compare.accumulation(mine, G)
    if accumulated:
        result["notes"].append(accumulated)
    if not result["tensors"] and not accumulated:
        target, inputs, options = learner.testing.cases.CASES[case](np.random.default_rng(size), size)
        gradcheck = importlib.import_module(f"{LEARNER}.testing.gradcheck").gradcheck
        report = gradcheck(target, *inputs, **options)
        result["finite_differences"] = report.max_rel_error
        if not report.ok:
            w = report.worst
            result["notes"].append(f"finite differences disagree: {w.name} relative error "
                                   f"{w.rel_error:.2e} at {w.mode} {w.worst_index}")
    result["ok"] = not result["tensors"] and not result["notes"]
    return result


def _stopped(result, error, root, files):
    info = describe(error, root, files)
    result["error"] = info
    return info["stub"] is not None


def grade(exercise, learner, reference, root, files):
    """Every check, then every claim, of one exercise; stops at the first stub that runs."""
    result = {"exercise": exercise.name, "checks": [], "claims": [], "error": None}
    for case, sizes in exercise.checks:
        for size in sizes:
            try:
                result["checks"].append(check_case(case, size, learner, reference))
            except Exception as error:           # the learner's code raised: report it here
                entry = {"case": case, "size": size, "ok": False}
                result["checks"].append(entry)
                if _stopped(entry, error, root, files):
                    result["error"] = entry["error"]
                    return result
    for text, check in claims.of(exercise.name):
        entry = {"claim": text, "ok": False}
        result["claims"].append(entry)
        try:
            entry["detail"] = check(learner, reference)
            entry["ok"] = True
        except claims.ClaimFailed as failure:
            entry["detail"] = str(failure)
        except Exception as error:
            if _stopped(entry, error, root, files):
                result["error"] = entry["error"]
                return result
    return result


def main(argv=None):
    """Grade one exercise; write the result JSON. Exit code 0 whatever the learner's code did."""
    root, name, files, out_path = (sys.argv[1:] if argv is None else argv)
    files = files.split(",") if files else []
    exercise = catalog.find(name)
    try:
        learner = importlib.import_module(LEARNER)
        importlib.import_module(f"{LEARNER}.testing.cases")
    except Exception as error:
        write_json(out_path, {"exercise": name, "checks": [], "claims": [],
                              "error": describe(error, root, files), "import_failed": True})
        return 0
    import npformer as reference
    import npformer.testing.cases  # noqa: F401  (the reference cases)
    result = grade(exercise, learner, reference, root, files)
    write_json(out_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
