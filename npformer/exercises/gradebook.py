"""Grading a class: every submission by the teacher's course file, in parallel, into a gradebook.

``grade_class(paths, course, out_dir)`` grades each submission (a workspace, or each workspace
in a folder of them) with ``grader.grade`` by the course's exercise list, ``jobs`` at a time,
and writes to ``out_dir``: ``gradebook.csv`` (one row per submission and exercise),
``submissions/<name>.json`` (the reports), and on request Gradescope's ``results.json`` (one
per submission under ``gradescope/<name>/``, and at the top when there is one submission) and
``junit.xml``. Points are the course's: an exercise that is done earns its points.
"""
from __future__ import annotations

import csv
import io
import json
import os
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor, as_completed

from ..files.fileio import atomic_write, write_json
from .grader import grade
from .judges import Judges
from .report import format_outcome
from .workspace import MARKER, WorkspaceError

CSV_FIELDS = ("submission", "exercise", "status", "checks_passed", "checks", "points", "max_points")


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


def grade_submission(name, directory, course, timeout=120.0, limits=None, judge=None):
    """{"submission", "score", "max_score", "notes", "exercises": [...]} of one submission
    (judged by ``judge``, a ``judges.Judge``, else by one of its own)."""
    printed = []
    rows = []
    try:
        outcomes = grade(directory, (), timeout, printed.append, say=lambda text: None, limits=limits,
                         course=course, judge=judge)
    except (WorkspaceError, OSError) as error:
        reason = str(error).split(": ", 1)[-1]
        outcomes = []
        rows = [{"exercise": e.name, "label": e.label, "status": "not graded", "checks_passed": 0,
                 "checks": 0, "points": 0.0, "max_points": course.points[e.name], "report": reason}
                for e in course.exercises]
    for o in outcomes:
        rows.append({"exercise": o.exercise.name, "label": o.exercise.label, "status": o.status,
                     "checks_passed": o.passed, "checks": o.total,
                     "points": course.points[o.exercise.name] if o.done else 0.0,
                     "max_points": course.points[o.exercise.name], "report": format_outcome(o)})
    notes = [line[len("note: "):] for line in printed if isinstance(line, str) and line.startswith("note: ")]
    return {"submission": name, "score": sum(r["points"] for r in rows), "max_score": course.total,
            "notes": notes, "exercises": rows}


def grade_class(paths, course, out_dir, jobs=None, timeout=120.0, limits=None, gradescope=False,
                junit=False, progress=None):
    """Grade every submission in ``paths`` by ``course``; write the gradebook to ``out_dir``;
    returns the list of per-submission dicts (``grade_submission``'s), in submission order."""
    jobs = jobs or os.cpu_count() or 1
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs: expected a whole number >= 1, got {jobs!r}")
    found = submissions(paths)
    progress = progress or (lambda text: print(text, file=sys.stderr, flush=True))
    began, finished, results = time.monotonic(), 0, {}

    def one(item):
        with judges.one() as judge:
            return item[0], grade_submission(item[0], item[1], course, timeout, limits, judge)
    with tempfile.TemporaryDirectory(prefix="npformer-class-") as root, ThreadPoolExecutor(max_workers=jobs) as pool:
        judges = Judges(min(jobs, len(found)), root)
        try:
            for graded in as_completed([pool.submit(one, item) for item in found]):
                name, book = graded.result()
                results[name] = book
                finished += 1
                done = sum(r["status"] == "done" for r in book["exercises"])
                elapsed = time.monotonic() - began
                progress(f"[{finished}/{len(found)}] {name}: {done} of {len(book['exercises'])} done, "
                         f"{book['score']:g}/{book['max_score']:g} points ({elapsed:.0f} s)")
        finally:
            judges.close()
    books = [results[name] for name, _ in found]
    write_gradebook(books, out_dir, gradescope, junit)
    return books


def write_gradebook(books, out_dir, gradescope=False, junit=False):
    """The files of the gradebook (see the module) for ``books`` in ``out_dir``."""
    os.makedirs(os.path.join(out_dir, "submissions"), exist_ok=True)
    text = io.StringIO()
    writer = csv.DictWriter(text, CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for book in books:
        for row in book["exercises"]:
            writer.writerow({"submission": book["submission"], **row})
    atomic_write(os.path.join(out_dir, "gradebook.csv"), lambda f: f.write(text.getvalue()), mode="w")
    for book in books:
        write_json(os.path.join(out_dir, "submissions", _file_name(book["submission"]) + ".json"), book)
    if gradescope:
        for book in books:
            folder = os.path.join(out_dir, "gradescope", _file_name(book["submission"]))
            os.makedirs(folder, exist_ok=True)
            write_json(os.path.join(folder, "results.json"), gradescope_results(book))
        if len(books) == 1:
            write_json(os.path.join(out_dir, "results.json"), gradescope_results(books[0]))
    if junit:
        xml = junit_xml(books)
        atomic_write(os.path.join(out_dir, "junit.xml"), lambda f: f.write(xml), mode="w")


def _file_name(name):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "submission"


def gradescope_results(book):
    """Gradescope's autograder ``results.json`` for one submission."""
    tests = [{"name": row["label"], "score": float(row["points"]), "max_score": float(row["max_points"]),
              "status": "passed" if row["status"] == "done" else "failed",
              "output": row["report"]} for row in book["exercises"]]
    output = "\n".join(book["notes"])
    return {"score": float(book["score"]), "output": output, "visibility": "visible",
            "stdout_visibility": "hidden", "tests": tests}


def junit_xml(books):
    """JUnit XML: a testsuite per submission, a testcase per exercise (failure: the report)."""
    suites = ET.Element("testsuites", name="npformer")
    for book in books:
        rows = book["exercises"]
        failed = [r for r in rows if r["status"] != "done"]
        suite = ET.SubElement(suites, "testsuite", name=book["submission"], tests=str(len(rows)),
                              failures=str(len(failed)), errors="0", skipped="0")
        for row in rows:
            case = ET.SubElement(suite, "testcase", classname=book["submission"], name=row["label"])
            if row["status"] != "done":
                failure = ET.SubElement(case, "failure", message=row["status"], type=row["status"])
                failure.text = row["report"]
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def summary(books):
    """The lines printed after grading: how many submissions, the points of each."""
    width = max([len(b["submission"]) for b in books] + [10])
    lines = [f"{'submission':{width}}  points"]
    lines += [f"{b['submission']:{width}}  {b['score']:g}/{b['max_score']:g}" for b in books]
    return lines


def load_book(path):
    """One submission's JSON back."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)
