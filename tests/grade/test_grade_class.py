"""Grading a class: the course file decides the exercises and points, the gradebook's formats
are what their readers expect (Gradescope's results.json, JUnit XML parsed back), grading in
parallel gives the same reports as one at a time, and a learner reads plain words for how
their code ended."""
import csv
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from npformer.exercises import catalog
from npformer.exercises.course import CourseError, load_course, write_course
from npformer.exercises.gradebook import grade_class, gradescope_results, junit_xml
from npformer.exercises.feedback import describe_run, ended
from npformer.exercises.workspace import write_workspace

ROOT = Path(__file__).resolve().parents[2]
RIGHT = "    return y * (d_out - np.sum(d_out * y, axis=cache.axis, keepdims=True))\n"
WRONG = "    return d_out - np.sum(d_out * y, axis=cache.axis, keepdims=True)\n"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Three submissions of one exercise (right, a seeded mistake, not started), graded by the
    CLI two at a time, and again in this process one at a time."""
    root = tmp_path_factory.mktemp("course")
    subs = root / "subs"
    key = write_workspace(subs / "ada", only=["softmax"], solutions=True)
    wrong = write_workspace(subs / "bo", only=["softmax"], solutions=True)
    path = Path(wrong.directory) / "t03_softmax.py"
    path.write_text(path.read_text().replace(RIGHT, WRONG))
    write_workspace(subs / "cy", only=["softmax"])
    course_file = root / "course.json"
    write_course(course_file, key, points=5)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NPFORMER_GRADE_EXAMPLES": "8"}
    ran = subprocess.run([sys.executable, "-m", "npformer", "grade", str(subs), "--course", str(course_file),
                          "--out", str(root / "book"), "--jobs", "2", "--gradescope", "--junit",
                          "--timeout", "300"], capture_output=True, text=True, env=env, cwd=root)
    os.environ["NPFORMER_GRADE_EXAMPLES"] = "8"
    try:
        sequential = grade_class([subs], load_course(course_file), root / "book1", jobs=1, timeout=300,
                                 progress=lambda text: None)
    finally:
        os.environ.pop("NPFORMER_GRADE_EXAMPLES")
    return ran, root / "book", sequential


def test_the_cli_writes_the_gradebook_with_the_courses_points(graded):
    ran, book, _ = graded
    assert ran.returncode == 0, ran.stderr
    assert "[3/3]" in ran.stderr                      # the progress line
    with open(book / "gradebook.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["submission"], r["exercise"], r["status"], float(r["points"])) for r in rows] == [
        ("ada", "softmax", "done", 5.0), ("bo", "softmax", "failing", 0.0), ("cy", "softmax", "not started", 0.0)]
    ada = next(r for r in rows if r["submission"] == "ada")
    assert int(ada["checks_passed"]) == int(ada["checks"]) > 0
    bo = json.loads((book / "submissions" / "bo.json").read_text())
    assert bo["max_score"] == 5 and "softmax" in bo["exercises"][0]["report"]


def test_gradescope_results_follow_its_schema(graded):
    _, book, _ = graded
    for name, score in (("ada", 5.0), ("bo", 0.0)):
        data = json.loads((book / "gradescope" / name / "results.json").read_text())
        assert isinstance(data["score"], float) and data["score"] == score
        (test,) = data["tests"]
        assert set(test) == {"name", "score", "max_score", "status", "output"}
        assert isinstance(test["score"], float) and isinstance(test["max_score"], float)
        assert test["status"] in ("passed", "failed") and isinstance(test["output"], str)
        assert (test["status"] == "passed") == (score == 5.0)
    assert not (book / "results.json").exists()      # only for a single submission


def test_junit_xml_parses_back(graded):
    _, book, _ = graded
    suites = ET.parse(book / "junit.xml").getroot()
    assert suites.tag == "testsuites"
    found = {s.get("name"): s for s in suites.findall("testsuite")}
    assert sorted(found) == ["ada", "bo", "cy"]
    assert found["ada"].get("failures") == "0" and found["ada"].find("testcase/failure") is None
    failure = found["bo"].find("testcase/failure")
    assert failure.get("type") == "failing" and "softmax" in failure.text


def test_parallel_grading_gives_the_same_reports_as_sequential(graded):
    _, book, sequential = graded
    parallel = [json.loads((book / "submissions" / f"{name}.json").read_text()) for name in ("ada", "bo", "cy")]

    def timeless(books):                     # a submission's own seconds differ from run to run
        return [{k: v for k, v in b.items() if k != "seconds"} for b in books]
    assert timeless(parallel) == timeless(json.loads(json.dumps(sequential)))


def test_a_course_file_is_checked(tmp_path):
    (tmp_path / "c.json").write_text('{"kind": "something else"}')
    with pytest.raises(CourseError, match="not an npformer course file"):
        load_course(tmp_path / "c.json")
    ws = write_workspace(tmp_path / "ws", only=["softmax"])
    with pytest.raises(CourseError, match="points: expected a number >= 0 for softmax, got -1"):
        write_course(tmp_path / "d.json", ws, points=-1)


def test_gradescope_and_junit_of_a_submission_not_graded():
    book = {"submission": "dee", "score": 0.0, "max_score": 10.0, "notes": ["no marker"], "exercises": [
        {"exercise": "softmax", "label": "01 softmax", "status": "not graded", "checks_passed": 0, "checks": 0,
         "points": 0.0, "max_points": 10.0, "report": "not a workspace"}]}
    assert gradescope_results(book)["tests"][0]["status"] == "failed"
    suite = ET.fromstring(junit_xml([book]).split("\n", 1)[1]).find("testsuite")
    assert (suite.get("failures"), suite.get("errors")) == ("0", "1")     # the grader's failure, not a test's
    assert suite.find("testcase/error").text == "not a workspace"


def test_the_gradebook_says_why_and_junit_skips_what_was_not_tried(graded):
    """The CSV's ``why``: the mistake's name for a failing row whose mistake is named, the status
    for one not started; JUnit skips "not started" with its reason; each progress line gives its
    submission's own seconds."""
    ran, book, _ = graded
    with open(book / "gradebook.csv", newline="") as f:
        why = {r["submission"]: r["why"] for r in csv.DictReader(f)}
    assert why["ada"] == "" and why["cy"] == "not started"
    assert why["bo"].startswith("mistake: "), why["bo"]
    suites = {s.get("name"): s for s in ET.parse(book / "junit.xml").getroot()}
    cy = suites["cy"]
    assert (cy.get("skipped"), cy.get("failures")) == ("1", "0")
    assert cy.find("testcase/skipped").get("message") == "not started"
    seconds = [float(line.rsplit("(", 1)[1].split()[0]) for line in ran.stderr.splitlines() if line.startswith("[")]
    assert len(seconds) == 3 and all(0 <= s < 300 for s in seconds), ran.stderr


def test_the_course_chooses_what_a_blocked_training_task_earns(tmp_path):
    """Training while softmax fails: "blocked", no grading, by default; with the course's
    "graded with npformer's code", it runs with npformer's softmax in place of the learner's."""
    from npformer.exercises.grader import grade
    key = write_workspace(tmp_path / "ws", only=["softmax", "linear", "train"], solutions=True)
    path = Path(key.directory) / "t03_softmax.py"
    path.write_text(path.read_text().replace(RIGHT, WRONG))
    course = write_course(tmp_path / "course.json", key, when_blocked="graded with npformer's code")
    os.environ["NPFORMER_GRADE_EXAMPLES"] = "4"
    try:
        blocked = grade(key.directory, ("train",), out=lambda text: None, say=lambda text: None)
        substituted = grade(key.directory, ("train",), out=lambda text: None, say=lambda text: None, course=course)
    finally:
        os.environ.pop("NPFORMER_GRADE_EXAMPLES")
    assert blocked[0].status == "blocked" and blocked[0].lines == ["blocked by 03 softmax (failing)"]
    assert substituted[0].status == "done", substituted[0].lines
    assert substituted[0].lines[0] == "graded with npformer's own code in place of 03 softmax (failing)"
    with pytest.raises(CourseError, match="when_blocked"):
        write_course(tmp_path / "other.json", key, when_blocked="half")


def test_how_the_code_ended_is_said_in_plain_words():
    assert ended(-2) == "interrupted (Ctrl-C)"
    assert "CPU-time limit" in ended(-24) and "memory limit" in ended(-9)
    exercise = catalog.exercise_named("softmax")
    status, lines = describe_run(exercise, None, "timeout", ["step 1 of 1000"],
                                 "softmax_backward (t03_softmax.py:56)", 5)
    assert status == "failing" and "in softmax_backward (t03_softmax.py:56)" in lines[0]
    assert "  step 1 of 1000" in lines


def test_the_gradescope_recipe_runs_here(tmp_path):
    """run_autograder's commands, with Gradescope's folders moved under tmp_path: a hand-out,
    the teacher's course file, a student's upload of the answer key -> results.json, full marks."""
    recipe = ROOT / "npformer" / "exercises" / "gradescope"
    source = tmp_path / "source"
    source.mkdir()
    (source / "npformer").symlink_to(ROOT / "npformer")
    handout = write_workspace(source / "handout", only=["softmax"])
    write_course(source / "course.json", handout, points=3)
    key = write_workspace(tmp_path / "key", only=["softmax"], solutions=True)
    upload = tmp_path / "submission"
    upload.mkdir()
    (upload / "t03_softmax.py").write_text((Path(key.directory) / "t03_softmax.py").read_text())
    env = {**os.environ, "AUTOGRADER_SOURCE": str(source), "SUBMISSION": str(upload),
           "RESULTS": str(tmp_path / "results"), "NPFORMER_GRADE_EXAMPLES": "8", "PYTHON": sys.executable,
           "NPFORMER_GRADE_USER": ""}      # this Python may not be readable by a `student` user
    ran = subprocess.run(["bash", str(recipe / "run_autograder")], capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr
    data = json.loads((tmp_path / "results" / "results.json").read_text())
    assert data["score"] == 3.0 and data["tests"][0]["status"] == "passed"
    assert "set -euo pipefail" in (recipe / "setup.sh").read_text()


def _pip_packages(text):
    """The packages of every `pip install` in a shell text (options and quotes left out)."""
    import shlex
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        for i in range(len(words) - 1):
            if words[i] == "pip" and words[i + 1] == "install":
                for word in words[i + 2:]:
                    if word in ("&&", ";", "||", "|"):
                        break
                    if not word.startswith("-"):
                        found.append(word)
    return sorted(found)


def test_the_docker_recipe_installs_what_setup_sh_does_and_runs_without_network():
    """The Dockerfile and setup.sh install the same packages; the documented `docker run` has
    no network, a user, limits, read-only mounts and installs nothing."""
    import shlex
    recipe = ROOT / "npformer" / "exercises" / "gradescope"
    dockerfile = (recipe / "Dockerfile").read_text()
    setup = (recipe / "setup.sh").read_text()
    try:
        import tomllib
    except ModuleNotFoundError:      # Python 3.10: the test extra brings tomli, the same parser
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = project["dependencies"] + project["optional-dependencies"]["verify"]
    assert _pip_packages(setup) == sorted(needed), _pip_packages(setup)      # all npformer imports
    assert _pip_packages(dockerfile) == _pip_packages(setup)
    instructions = [line.split()[0] for line in dockerfile.replace("\\\n", " ").splitlines()
                    if line.strip() and not line.startswith("#")]
    assert instructions[0] == "FROM" and "FROM python:3.11-slim" in dockerfile
    assert not {"COPY", "ADD"} & set(instructions)                       # nothing of the student's
    user = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    assert user and user[-1] not in ("root", "0") and "useradd --uid 10001" in dockerfile
    doc = (ROOT / "docs" / "teaching.md").read_text()
    block = doc[doc.index("docker build -t npformer-grader"):]
    block = block[:block.index("```")]
    run = next(line for line in block.replace("\\\n", " ").splitlines() if line.startswith("docker run"))
    words = shlex.split(run)
    assert words[words.index("--network") + 1] == "none"
    assert words[words.index("--user") + 1] == user[-1]
    for option in ("--memory", "--pids-limit", "--read-only"):
        assert option in words, option
    mounts = [words[i + 1] for i, w in enumerate(words) if w == "-v"]
    assert [m for m in mounts if not m.endswith(":ro")] == ["$PWD/results:/autograder/results"], mounts
    assert "pip" not in run and "npformer-grader" in words
    assert "docker build -t npformer-grader npformer/exercises/gradescope" in block


def test_without_bubblewrap_a_workspace_is_graded_and_a_class_is_refused_unless_the_teacher_says(tmp_path):
    """No bubblewrap on PATH: one workspace is graded, its first line saying there are no walls;
    a class stops with a one-line error naming what to install (exit 2); with
    --without-isolation it is graded, and every row says so."""
    key = write_workspace(tmp_path / "subs" / "ada", only=["softmax"], solutions=True)
    write_course(tmp_path / "course.json", key)
    empty = tmp_path / "no-tools"
    empty.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NPFORMER_GRADE_EXAMPLES": "4", "PATH": str(empty)}

    def grade(*argv):
        return subprocess.run([sys.executable, "-m", "npformer", "grade", *argv], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=600)
    one = grade(key.directory)
    assert one.returncode == 0 and one.stdout.splitlines()[0] == (
        "isolation: none (bubblewrap is not installed: apt install bubblewrap): the code runs as you, "
        "with limits only"), one.stdout
    course = ["--course", str(tmp_path / "course.json"), "--out", str(tmp_path / "book")]
    refused = grade(str(tmp_path / "subs"), *course)
    assert refused.returncode == 2 and not (tmp_path / "book").exists()
    assert refused.stderr.strip().splitlines()[-1] == (
        "npformer grade: error: grading other people's code needs walls, and here bubblewrap is not "
        "installed: apt install bubblewrap; or pass --without-isolation to grade with limits only")
    allowed = grade(str(tmp_path / "subs"), *course, "--without-isolation", "--gradescope")
    assert allowed.returncode == 0, allowed.stderr
    with open(tmp_path / "book" / "gradebook.csv", newline="") as f:
        assert [(r["status"], r["isolation"]) for r in csv.DictReader(f)] == [("done", "graded without isolation")]
    results = json.loads((tmp_path / "book" / "results.json").read_text())
    assert "graded without isolation" in results["output"]
