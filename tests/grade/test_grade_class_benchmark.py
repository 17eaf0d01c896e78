"""benchmarks/grade_class.py builds a class of the mix it says and times one grading run of it
(here two submissions of two exercises: the 40 of the real run are the lead's to time)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.grade_class import build_class, seeded_mistakes  # noqa: E402
from npformer.exercises import catalog  # noqa: E402
from npformer.exercises.workspace import write_workspace  # noqa: E402


def test_the_class_holds_complete_seeded_and_half_done_submissions(tmp_path):
    names = ["softmax", "linear", "norm"]
    course, subs, counts = build_class(tmp_path / "class", 12, names, seed=3)
    assert sum(counts.values()) == 12 and all(counts.values()), counts
    key = tmp_path / "class" / "key"
    handout = tmp_path / "class" / "handout"
    kinds = {"complete": 0, "mistakes": 0, "half done": 0}
    for student in sorted(subs.iterdir()):
        files = sorted(p.name for p in key.iterdir() if p.suffix == ".py")
        same_as_key = [(student / f).read_text() == (key / f).read_text() for f in files]
        stubs = [(student / f).read_text() == (handout / f).read_text() for f in files]
        if all(same_as_key):
            kinds["complete"] += 1
        elif any(stubs):
            kinds["half done"] += 1
        else:
            kinds["mistakes"] += 1
    assert kinds == counts
    assert course.exists() and (handout / "npformer-workspace.json").exists()


def test_a_seeded_mistake_is_an_edit_that_applies_once():
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        key = write_workspace(os.path.join(folder, "key"), only=["softmax"], solutions=True)
        found = seeded_mistakes(key, catalog.exercise_named("softmax"))
        assert found and all(name == "t03_softmax.py" for name, _ in found)
        text = Path(key.path("t03_softmax.py")).read_text()
        assert all(text.count(old) == 1 and old != new for _, edits in found for old, new in edits)


def test_the_benchmark_grades_a_class_of_two_and_prints_its_times():
    env = {**os.environ, "NPFORMER_GRADE_EXAMPLES": "8"}
    done = subprocess.run([sys.executable, "benchmarks/grade_class.py", "--n", "2", "--exercises",
                           "softmax,linear"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("class: 2 submissions (1 complete") and "of 2 exercises, --jobs 2" in lines[0]
    assert lines[1].startswith("graded: ") and "done" in lines[1]
    assert lines[2].startswith("wall time: ") and "per submission: " in lines[2]
    assert lines[3].startswith("CPU time of the grading processes: ")
    assert lines[4].startswith("machine: ") and "OPENBLAS_CORETYPE=" in lines[4] and "OPENBLAS_L2_SIZE=" in lines[4]
