"""A grading session: one judge (the grading process) judges exercise after exercise through one
sandbox per submission, and what it says of an exercise does not depend on what it judged
before; when the grader itself fails (its sandbox does not start), the report says so and never
blames the learner's code; Ctrl-C ends grading at once and leaves nothing running."""
from pathlib import Path

import pytest

from npformer.exercises import grade
from npformer.exercises.walls import sandbox
from npformer.exercises.workspace import write_workspace

RIGHT = "    return y * (d_out - np.sum(d_out * y, axis=cache.axis, keepdims=True))\n"
DIAGONAL_ONLY = "    return y * d_out\n"


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """An answer key of three exercises whose softmax backward keeps only the Jacobian's diagonal."""
    monkeypatch.setenv("NPFORMER_GRADE_EXAMPLES", "10")
    ws = write_workspace(tmp_path / "ws", only=["embedding", "linear", "softmax"], solutions=True)
    path = Path(ws.path("t03_softmax.py"))
    source = path.read_text()
    assert source.count(RIGHT) == 1
    path.write_text(source.replace(RIGHT, DIAGONAL_ONLY))
    return ws


def test_an_exercise_judged_third_reads_as_judged_alone(workspace):
    """softmax judged by a judge that judged embedding and linear first, and by a new judge:
    the same report, its smallest example included (the same inputs were drawn)."""
    after_others = {o.exercise.name: o for o in grade(workspace.directory, (), out=lambda _: None)}
    alone, = grade(workspace.directory, ("softmax",), out=lambda _: None)
    assert after_others["embedding"].done and after_others["linear"].done
    assert alone.status == after_others["softmax"].status == "failing"
    assert alone.lines == after_others["softmax"].lines
    assert any("smallest example" in line for line in alone.lines), alone.lines


def test_a_judge_that_fails_is_the_graders_failure_not_the_learners(workspace, monkeypatch):
    """A sandbox whose program cannot start (its module missing) fails twice: the exercise is
    "not graded", the report says the grader failed, and nothing says the learner's code ended
    anything."""
    monkeypatch.setattr(sandbox, "PROGRAM", "from npformer.exercises.no_such_zygote import main; main({fd})")
    printed = []
    outcome, = grade(workspace.directory, ("linear",), out=printed.append)
    assert outcome.status == "not graded" and not outcome.done
    text = "\n".join(printed)
    assert "the grader itself failed here, twice (not your code)" in text
    assert "No module named 'npformer.exercises.no_such_zygote'" in text
    assert "your code ended" not in text
    assert printed[-1] == "next: grade 02 linear again (the grader failed there, not your code)"


def _descendants(pid):
    """The pids of every live process below ``pid`` (read from /proc)."""
    import os
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parents[int(name)] = int(f.read().rpartition(")")[2].split()[1])
            except OSError:
                continue
    found, todo = set(), [pid]
    while todo:
        above = todo.pop()
        children = [p for p, parent in parents.items() if parent == above]
        found.update(children)
        todo += children
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads processes from /proc")
def test_ctrl_c_ends_grading_at_once_and_leaves_nothing_running(tmp_path):
    """Ctrl-C while an exercise is judged: the grader says so and exits 130 within 4 s, and
    its sandbox, the zygote in it and the learner's process are all gone."""
    import signal
    import subprocess
    import sys
    import time
    ws = write_workspace(tmp_path / "ws", only=["attention"], solutions=True)
    # a test worker may run with SIGINT ignored, and Python would then keep it ignored
    grader = subprocess.Popen([sys.executable, "-m", "npformer", "grade", ws.directory], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    began, below = time.monotonic(), set()
    while len(below) < 3 and time.monotonic() - began < 60:      # bubblewrap, the zygote, a learner
        time.sleep(0.2)
        below |= _descendants(grader.pid)
    assert len(below) >= 3 and grader.poll() is None, below
    grader.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    out, _ = grader.communicate(timeout=30)
    assert grader.returncode == 130 and "interrupted" in out, out[-500:]
    assert time.monotonic() - interrupted < 4.0          # the sandbox is killed, not waited for
    time.sleep(0.5)
    assert not [p for p in below if _running(p)], below


def _running(pid):
    """True while ``pid`` is a live process (a zombie waiting for its reaper has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False
