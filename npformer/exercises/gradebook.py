"""Grading a class: every submission by the teacher's course file, in parallel, into a gradebook.

``grade_class(paths, course, out_dir)`` writes the hand-out build once, then grades each
submission (a workspace, or each workspace in a folder of them) with ``grader.grade`` by the
course's exercise list, ``jobs`` at a time: each job is a process of a pool
(``concurrent.futures``), and each submission is graded there in a sandbox of its own. Once
every job has ended, and so every learner's process with it, it writes to ``out_dir``:
``gradebook.csv`` (one row per submission and exercise), ``submissions/<name>.json`` (the
reports as a student reads them, a screenful each, and every line of their findings in
``detail``), and on request Gradescope's ``results.json`` (one per submission under
``gradescope/<name>/``, and at the top when there is one submission) and ``junit.xml``. Points
are the course's: an exercise that is done earns its points. Every text a submission controls
(what its code printed, its folder's name) is made safe to show first (``safe_text``).

Grading other people's code needs walls: without bubblewrap, ``grade_class`` refuses
(``IsolationMissing``) unless the teacher passes ``without_isolation=True``; every row then says
"graded without isolation".
"""
from __future__ import annotations

import csv
import hashlib
import io
import multiprocessing
import os
import sys
import time
import urllib.parse
import xml.etree.ElementTree as ET
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from ..core.fileio import atomic_write, write_json
from .grader import DEFAULT_TIMEOUT, grade
from .grading_build import shared_build
from .feedback import format_outcome
from .safe_text import csv_cell, one_line, shown
from .walls.bubblewrap import detect
from .workspace import MARKER, WorkspaceError

CSV_FIELDS = ("submission", "exercise", "status", "why", "checks_passed", "checks", "points", "max_points",
              "isolation")
WITHOUT = "graded without isolation"


class IsolationMissing(RuntimeError):
    """Other people's code would run without walls here (message: what to install)."""


def submissions(paths):
    """[(name, directory)]: each path that is a workspace, else each folder inside it, sorted."""
    found = []
    for path in paths:
        path = os.path.abspath(os.fspath(path))
        if not os.path.isdir(path):
            raise WorkspaceError(f"SUBMISSIONS: {path} is not a directory")
        if os.path.exists(os.path.join(path, MARKER)):
            found.append((os.path.basename(path), path))
            continue
        inside = sorted(n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n)) and not n.startswith("."))
        if not inside:
            raise WorkspaceError(f"SUBMISSIONS: {path} is neither a workspace nor a folder of them")
        found += [(name, os.path.join(path, name)) for name in inside]
    names = [n for n, _ in found]
    if len(set(names)) != len(names):                 # two folders called alike: keep both apart
        found = [(os.path.relpath(d), d) for _, d in found]
    return found


def _why(outcome):
    """The gradebook's reason for a row that is not done: the mistake's name, else the first
    thing its report says."""
    if outcome.done:
        return ""
    if outcome.mistake:
        return f"mistake: {outcome.mistake}"
    return (outcome.lines or [outcome.status])[0][:200]


def grade_submission(name, directory, course, timeout=DEFAULT_TIMEOUT, limits=None, build=None, isolation=None):
    """{"submission", "score", "max_score", "notes", "seconds", "exercises": [...]} of one
    submission, graded against ``build`` with ``isolation``."""
    began = time.monotonic()
    isolation = isolation or detect()
    walls = WITHOUT if isolation.bwrap is None else "bubblewrap" + (", seccomp" if isolation.seccomp else "")
    printed, rows = [], []
    try:
        outcomes = grade(directory, (), timeout, printed.append, say=lambda text: None, limits=limits,
                         course=course, build=build, isolation=isolation)
    except (WorkspaceError, OSError) as error:           # the submission's folder cannot be graded
        reason = one_line(str(error).split(": ", 1)[-1])
        outcomes = []
        rows = [{"exercise": e.name, "label": e.label, "status": "not graded", "why": reason[:200],
                 "checks_passed": 0, "checks": 0, "points": 0.0, "max_points": course.points[e.name],
                 "isolation": walls, "report": reason} for e in course.exercises]
    except Exception as error:                # noqa: BLE001 - npformer's failure: this row, not the class
        return _not_graded(name, course, one_line(f"{type(error).__name__}: {error}")[:200])
    for o in outcomes:
        rows.append({"exercise": o.exercise.name, "label": o.exercise.label, "status": o.status,
                     "why": one_line(_why(o)), "checks_passed": o.passed, "checks": o.total,
                     "points": course.points[o.exercise.name] if o.done else 0.0,
                     "max_points": course.points[o.exercise.name], "isolation": walls,
                     "report": shown(format_outcome(o)), "detail": [one_line(line) for line in o.lines]})
    notes = [line[len("note: "):] for line in printed if isinstance(line, str) and line.startswith("note: ")]
    return {"submission": one_line(name), "file": _file_name(name), "score": sum(r["points"] for r in rows),
            "max_score": course.total, "notes": notes, "isolation": walls, "seconds": round(time.monotonic() - began, 1), "exercises": rows}


def _not_graded(name, course, why):
    rows = [{"exercise": e.name, "label": e.label, "status": "not graded", "why": why, "checks_passed": 0,
             "checks": 0, "points": 0.0, "max_points": course.points[e.name], "isolation": "",
             "report": f"the grader itself failed on this submission ({why}): grade it again"}
            for e in course.exercises]
    return {"submission": one_line(name), "file": _file_name(name), "score": 0.0, "max_score": course.total,
            "notes": [], "isolation": "",
            "seconds": 0.0, "exercises": rows}


def _pool_context():
    """Jobs forked from this process where the system allows it (npformer is imported already)."""
    return multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None


def _graded_in_pool(found, jobs, arguments, progress, results, total):
    """Grade ``found`` in a pool of ``jobs`` processes into ``results`` (of ``total`` in all);
    the names whose job died with its process."""
    lost = []
    with ProcessPoolExecutor(max_workers=jobs, mp_context=_pool_context()) as pool:
        futures = {pool.submit(grade_submission, name, directory, *arguments): name for name, directory in found}
        for future in as_completed(futures):
            name = futures[future]
            try:
                book = future.result()
            except BrokenProcessPool:
                lost.append(name)
                continue
            results[name] = book
            done = sum(r["status"] == "done" for r in book["exercises"])
            progress(f"[{len(results)}/{total}] {book['submission']}: "
                     f"{done} of {len(book['exercises'])} done, {book['score']:g}/{book['max_score']:g} points "
                     f"({book['seconds']:.0f} s)")
    return lost


def grade_class(paths, course, out_dir, jobs=None, timeout=DEFAULT_TIMEOUT, limits=None, gradescope=False,
                junit=False, progress=None, without_isolation=False):
    """Grade every submission in ``paths`` by ``course``; write the gradebook to ``out_dir``;
    returns the list of per-submission dicts (``grade_submission``'s), in submission order."""
    jobs = jobs or os.cpu_count() or 1
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs: expected a whole number >= 1, got {jobs!r}")
    isolation = detect()
    if isolation.bwrap is None and not without_isolation:
        raise IsolationMissing(f"grading other people's code needs walls, and here {isolation.why_not}; "
                               f"or pass --without-isolation to grade with limits only")
    found = submissions(paths)
    progress = progress or (lambda text: print(shown(text), file=sys.stderr, flush=True))
    results = {}
    arguments = (course, timeout, limits, shared_build(), isolation)      # the build: written once
    lost = _graded_in_pool(found, min(jobs, len(found)), arguments, progress, results, len(found))
    if lost:                                  # once more, in a new pool: a job's process died
        again = [(n, d) for n, d in found if n in lost]
        lost = _graded_in_pool(again, min(jobs, len(again)), arguments, progress, results, len(found))
    for name in lost:
        results[name] = _not_graded(name, course, "its grading process died twice")
    books = [results[name] for name, _ in found]
    write_gradebook(books, out_dir, gradescope, junit)
    return books


def write_gradebook(books, out_dir, gradescope=False, junit=False):
    """The files of the gradebook (see the module) for ``books`` in ``out_dir``, each written
    whole or not at all."""
    os.makedirs(os.path.join(out_dir, "submissions"), exist_ok=True)
    text = io.StringIO()
    writer = csv.DictWriter(text, CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for book in books:
        for row in book["exercises"]:
            writer.writerow({k: csv_cell(v) for k, v in {"submission": book["submission"], **row}.items()})
    atomic_write(os.path.join(out_dir, "gradebook.csv"), lambda f: f.write(text.getvalue()), mode="w")
    for book in books:
        write_json(os.path.join(out_dir, "submissions", book["file"] + ".json"), book)
    if gradescope:
        for book in books:
            folder = os.path.join(out_dir, "gradescope", book["file"])
            os.makedirs(folder, exist_ok=True)
            write_json(os.path.join(folder, "results.json"), gradescope_results(book))
        if len(books) == 1:
            write_json(os.path.join(out_dir, "results.json"), gradescope_results(books[0]))
    if junit:
        xml = junit_xml(books)
        atomic_write(os.path.join(out_dir, "junit.xml"), lambda f: f.write(xml), mode="w")


def _file_name(name):
    """The file name of a submission's results: its name percent-encoded (two names never share
    one; a dot first is encoded too), shortened with a digest of the name when long."""
    encoded = urllib.parse.quote(name, safe="-_.")
    encoded = ("%2E" + encoded[1:] if encoded.startswith(".") else encoded) or "%00"
    if len(encoded) > 120:
        encoded = encoded[:100] + "-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return encoded


def gradescope_results(book):
    """Gradescope's autograder ``results.json`` for one submission."""
    tests = [{"name": row["label"], "score": float(row["points"]), "max_score": float(row["max_points"]),
              "status": "passed" if row["status"] == "done" else "failed",
              "output": row["report"]} for row in book["exercises"]]
    output = "\n".join(book["notes"] + ([WITHOUT] if book.get("isolation") == WITHOUT else []))
    return {"score": float(book["score"]), "output": output, "visibility": "visible",
            "stdout_visibility": "hidden", "tests": tests}


SKIPPED = ("not started", "blocked")


def junit_xml(books):
    """JUnit XML: a testsuite per submission, a testcase per exercise: done passes, "not started"
    and "blocked" are skipped with their reason, "not graded" is an error, the rest failures."""
    suites = ET.Element("testsuites", name="npformer")
    for book in books:
        rows = book["exercises"]
        count = {kind: sum(r["status"] == kind for r in rows) for kind in ("not graded", *SKIPPED)}
        skipped = count["not started"] + count["blocked"]
        failed = sum(r["status"] not in ("done", "not graded", *SKIPPED) for r in rows)
        suite = ET.SubElement(suites, "testsuite", name=book["submission"], tests=str(len(rows)),
                              failures=str(failed), errors=str(count["not graded"]), skipped=str(skipped))
        for row in rows:
            case = ET.SubElement(suite, "testcase", classname=book["submission"], name=row["label"])
            if row["status"] in SKIPPED:
                ET.SubElement(case, "skipped", message=row.get("why") or row["status"])
            elif row["status"] == "not graded":
                ET.SubElement(case, "error", message=row.get("why") or row["status"]).text = row["report"]
            elif row["status"] != "done":
                failure = ET.SubElement(case, "failure", message=row.get("why") or row["status"], type=row["status"])
                failure.text = row["report"]
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def summary(books):
    """The lines printed after grading: how many submissions, the points of each."""
    width = max([len(b["submission"]) for b in books] + [10])
    lines = [f"{'submission':{width}}  points"]
    lines += [f"{b['submission']:{width}}  {b['score']:g}/{b['max_score']:g}" for b in books]
    return lines
