"""Strangers' code cannot cheat or harm: each attack a submission may try, as a throwaway
workspace, is refused, reported or contained, and never graded done.

The attacks are graded together, once, as one class (``grade_class``, two at a time); each
test then reads its submission's row. Every attack returns npformer's own gradient when it
works, so an attack that got through would be graded done."""
import json
import os
import sys
import textwrap

import pytest

from npformer.exercises.course import write_course
from npformer.exercises.gradebook import grade_class
from npformer.exercises.sandbox import Limits
from npformer.exercises.workspace import MARKER, write_workspace

from limited_run import run_limited

RIGHT = "    return y * (d_out - np.sum(d_out * y, axis=cache.axis, keepdims=True))\n"

# (name, code at the end of the file, the body of softmax_backward after `y = cache.y`)
ATTACKS = {
    "import-before-patch": ("from npformer.t03_softmax import softmax_backward as _own\n",
                            "    return _own(d_out, cache)\n"),
    "source-under-another-name": (
        "import importlib.util, npformer.t03_softmax as _t\n"
        "_spec = importlib.util.spec_from_file_location('stolen', _t.__file__)\n"
        "_mod = importlib.util.module_from_spec(_spec)\n"
        "_spec.loader.exec_module(_mod)\n", "    return _mod.softmax_backward(d_out, cache)\n"),
    "patching-reference": ("", "    from npformer.testing.patching import reference\n"
                               "    return reference('npformer.t03_softmax.softmax_backward')(d_out, cache)\n"),
    "patching-reference-at-import": ("from npformer.testing.patching import reference\n"
                                     "_own = reference('npformer.t03_softmax.softmax_backward')\n",
                                     "    return _own(d_out, cache)\n"),
    "gc-originals": ("", "    import gc\n"
                         "    own = [f for f in gc.get_objects() if getattr(f, '__qualname__', '') == "
                         "'softmax_backward' and f.__module__ == 'npformer.t03_softmax']\n"
                         "    return own[0](d_out, cache)\n"),
    "frame-walk": ("", "    import sys\n    frame = sys._getframe()\n"
                       "    while frame is not None:\n        frame = frame.f_back\n"
                       "    return 0 * d_out\n"),
    "forged-result": ("import os, json\n"
                      "for _fd in range(3, 64):\n"
                      "    try:\n"
                      "        os.write(_fd, json.dumps({'exercise': 'softmax', 'checks': [{'ok': True}], "
                      "'claims': []}).encode())\n"
                      "    except OSError:\n        pass\n"
                      "os._exit(0)\n", RIGHT),
    "patch-the-runner": ("import npformer.exercises.judging as _j, npformer.exercises.runner as _r\n"
                         "_fake = lambda *a, **k: {'exercise': 'softmax', 'checks': [], 'claims': []}\n"
                         "_j.judge_exercise = _r.judge_exercise = _fake\n", "    return 0 * d_out\n"),
    "patch-the-comparison": ("import npformer.testing.compare as _c, npformer.testing.conformance as _k\n"
                             "_c.compare_tensor = _k.compare_tensor = lambda *a, **k: None\n"
                             "_k.TOLERANCES['float64'] = 1e9\n", "    return 0 * d_out\n"),
    "fork-children": ("import os\nfor _ in range(50):\n    if os.fork() == 0:\n"
                      "        import time; time.sleep(600)\n", RIGHT),
    "flood-fd-1": ("", "    import os\n    os.write(1, b'x' * (64 << 20))\n" + RIGHT),
    "delete-outside": ("", "    import shutil\n    shutil.rmtree(OUTSIDE, ignore_errors=False)\n" + RIGHT),
    "read-outside": ("", "    open(SECRET).read()\n" + RIGHT),
    "allocate-20-gib": ("", "    big = np.ones((20 << 30) // 8)\n" + RIGHT),
    # the process that forked it (the judge's nursery), ended so that the next one starts elsewhere
    "kill-the-nursery": ("import os as _os, signal as _signal\n_os.kill(_os.getppid(), _signal.SIGKILL)\n", RIGHT),
}


def _submission(root, name, tail, body, outside):
    ws = write_workspace(root / name, only=["softmax"], solutions=True)
    path = os.path.join(ws.directory, "t03_softmax.py")
    source = open(path, encoding="utf-8").read()
    assert RIGHT in source
    source = source.replace(RIGHT, body).replace("OUTSIDE", repr(str(outside / "keep")))
    source = source.replace("SECRET", repr(str(outside / "secret.txt")))
    with open(path, "w", encoding="utf-8") as f:
        f.write(source + "\n" + tail)
    return ws


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    outside = tmp_path_factory.mktemp("outside")
    (outside / "keep").mkdir()
    (outside / "keep" / "notes.txt").write_text("the teacher's own file\n")
    (outside / "secret.txt").write_text("another student's answers\n")
    subs = root / "subs"
    subs.mkdir()
    key = write_workspace(subs / "honest", only=["softmax"], solutions=True)
    course = write_course(root / "course.json", key)
    for name, (tail, body) in ATTACKS.items():
        _submission(subs, name, tail, body, outside)
    # the marker edited to drop the exercise, and a file that is a link to someone's answer key
    marker = subs / "fewer-exercises"
    write_workspace(marker, only=["softmax"])
    data = json.loads((marker / MARKER).read_text())
    data["exercises"] = []
    (marker / MARKER).write_text(json.dumps(data))
    linked = subs / "symlink-to-key"
    write_workspace(linked, only=["softmax"])
    os.remove(linked / "t03_softmax.py")
    os.symlink(key.directory + "/t03_softmax.py", linked / "t03_softmax.py")
    os.environ["NPFORMER_GRADE_EXAMPLES"] = "8"
    try:
        books = grade_class([subs], course, root / "book", jobs=2, timeout=300,
                            limits=Limits(memory=2 << 30), progress=lambda text: None)
    finally:
        os.environ.pop("NPFORMER_GRADE_EXAMPLES")
    return {b["submission"]: b for b in books}, outside


def _row(graded, name):
    books, _ = graded
    (row,) = books[name]["exercises"]
    return row


def test_the_honest_submission_is_done(graded):
    assert _row(graded, "honest")["status"] == "done"


@pytest.mark.parametrize("name, says", [
    ("import-before-patch", "your code called npformer's own softmax_backward"),   # a stand-in, refusing
    ("source-under-another-name", "your code opened npformer's own file"),       # the .pyc or the .py
    ("patching-reference-at-import", "your code called npformer's own softmax_backward"),
    # while graded, reference() still gives npformer's own function (a patch is a dispatcher's
    # choice, not a rebinding), which refuses the learner's code
    ("patching-reference", "your code called npformer's own softmax_backward"),
    ("gc-originals", "gc.get_objects from your code"),
    ("frame-walk", "from your code: the grader's frames are not yours to read"),
    ("forged-result", "your code wrote a result of its own to the grader's channel"),
    ("patch-the-runner", "your code changed npformer's grader: npformer.exercises.judging.judge_exercise"),
    ("patch-the-comparison", "your code changed npformer's grader: npformer.testing.compare.compare_tensor"),
    ("fork-children", "os.fork from your code"),
    ("kill-the-nursery", "os.kill from your code"),
    ("delete-outside", "shutil.rmtree of"),
    ("read-outside", "outside the workspace"),
])
def test_each_cheat_is_refused_and_said(graded, name, says):
    row = _row(graded, name)
    assert row["status"] == "failing" and row["points"] == 0
    assert says in " ".join(row["report"].split()), row["report"]


def test_nothing_outside_was_deleted(graded):
    _, outside = graded
    assert (outside / "keep" / "notes.txt").read_text() == "the teacher's own file\n"


def test_a_flood_of_output_is_capped_and_the_code_still_graded(graded):
    row = _row(graded, "flood-fd-1")
    assert row["status"] == "done"            # printing is allowed; it is only cut short
    books, _ = graded
    assert len(json.dumps(books["flood-fd-1"])) < 1 << 20


def test_a_20_gib_allocation_meets_the_memory_limit(graded):
    row = _row(graded, "allocate-20-gib")
    assert row["status"] == "failing" and "MemoryError" in row["report"]


def test_the_exercise_list_is_the_courses_and_a_changed_marker_is_said(graded):
    books, _ = graded
    book = books["fewer-exercises"]
    assert [r["exercise"] for r in book["exercises"]] == ["softmax"]
    assert book["exercises"][0]["status"] == "not started"
    assert any("npformer-workspace.json differs from the hand-out" in n for n in book["notes"])


def test_a_file_linked_outside_the_workspace_is_refused(graded):
    row = _row(graded, "symlink-to-key")
    assert row["status"] == "failing" and "outside the workspace: refused" in " ".join(row["report"].split())


def test_children_that_outlive_the_process_are_ended(tmp_path):
    script = textwrap.dedent("""
        import os, time
        for _ in range(20):
            if os.fork() == 0:
                os.setpgid(0, 0)            # leave the process group: the session still holds it
                time.sleep(600)
        print("forked", flush=True)
    """)
    ran = run_limited([sys.executable, "-c", script], str(tmp_path), Limits(wall=20))
    assert ran.code == 0 and b"forked" in ran.output
    assert ran.killed == 20
    from npformer.exercises.sandbox import session_members
    assert session_members(ran.pid if hasattr(ran, "pid") else -1) == []


def test_output_written_at_the_fd_level_is_capped(tmp_path):
    script = "import os\nos.write(1, b'y' * (50 << 20))\nos.write(2, b'z' * 1000)\n"
    ran = run_limited([sys.executable, "-c", script], str(tmp_path), Limits(output=4096))
    assert len(ran.output) == 4096 and ran.dropped == (50 << 20) + 1000 - 4096


def test_the_memory_and_cpu_limits_hold(tmp_path):
    ran = run_limited([sys.executable, "-c", "import numpy as np; np.ones((3 << 30) // 8)"], str(tmp_path),
                      Limits(memory=1 << 30))
    assert ran.code == 1 and b"MemoryError" in ran.output
    ran = run_limited([sys.executable, "-c", "while True: pass"], str(tmp_path), Limits(cpu=1, wall=30))
    assert ran.code == -24                     # SIGXCPU, long before the wall clock


def test_the_process_cap_is_the_users_count_plus_the_allowance(tmp_path):
    from npformer.exercises.sandbox import user_tasks
    before = user_tasks()
    script = "print([l for l in open('/proc/self/limits') if l.startswith('Max processes')][0])"
    ran = run_limited([sys.executable, "-c", script], str(tmp_path), Limits(processes=32))
    soft, hard = ran.output.decode().split()[2:4]
    # the user's count moves while other jobs run: the cap follows it, give or take a few
    assert soft == hard and abs(int(soft) - (before + 1 + 32)) <= 24, (soft, before)


def test_a_fork_bomb_of_50_children_is_capped_or_ended(tmp_path):
    script = textwrap.dedent("""
        import os, time
        started = refused = 0
        for _ in range(50):
            try:
                pid = os.fork()
            except OSError:
                refused += 1
                continue
            if pid == 0:
                time.sleep(600)
            started += 1
        print("started", started, "refused", refused, flush=True)
    """)
    ran = run_limited([sys.executable, "-c", script], str(tmp_path), Limits(wall=30, processes=10))
    words = ran.output.decode().split()
    started, refused = int(words[words.index("started") + 1]), int(words[words.index("refused") + 1])
    assert started + refused == 50 and ran.killed == started
    if os.getuid() != 0:                        # the kernel leaves root's forks uncounted
        assert refused > 0 and started <= 10 + 24


GRADE_ENTRY = """
import ctypes, sys
import npformer.cli.grade as entry
import npformer.exercises.gradebook as gradebook
from npformer.exercises.course import Course
libc = ctypes.CDLL(None, use_errno=True)
seen = []
def look(*args, **kwargs):          # where the first learner's process would start
    seen.append(libc.prctl(3, 0, 0, 0, 0))      # PR_GET_DUMPABLE
    return []
entry.grade = gradebook.grade_class = look
import npformer.exercises.course as course
course.load_course = lambda path: None
parser = __import__("argparse").ArgumentParser()
entry.add_arguments(parser)
before = libc.prctl(3, 0, 0, 0, 0)
entry.run(parser.parse_args(sys.argv[1:]))
print("dumpable:", before, *seen)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
@pytest.mark.parametrize("argv", [["ws"], ["submissions", "--course", "course.json", "--out", "book"]])
def test_the_grading_parent_is_not_dumpable_before_a_learner_process_starts(argv, tmp_path):
    """``npformer grade`` (one workspace, or a class) makes itself non-dumpable before it grades:
    a learner's process of the same user cannot ptrace it or read /proc/PID/mem."""
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    ran = subprocess.run([sys.executable, "-c", GRADE_ENTRY, *argv], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    line = next(line for line in ran.stdout.splitlines() if line.startswith("dumpable:"))
    assert line.split()[1:] == ["1", "0"], ran.stdout          # dumpable before, not once grading
