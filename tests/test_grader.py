"""Grading a learner's code: the usual mistakes diagnosed, errors kept inside their exercise.

Each test writes an answer key (the library's own bodies, which the rest of the suite
checks by finite differences), seeds one mistake by editing one line, and grades the
exercise in its own process.
"""
import numpy as np
import pytest

from npformer.exercises.grader import grade
from npformer.exercises.workspace import write_workspace
from npformer.exercises.compare import constant_ratio, ratio_diagnosis, shape_diagnosis


def _seeded(tmp_path, exercise, file, old, new):
    """An answer key for ``exercise`` with ``old`` replaced by ``new`` (exactly once) in ``file``."""
    workspace = write_workspace(tmp_path / "ws", only=[exercise], solutions=True)
    path = workspace.path(file)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text.count(old) == 1, f"the line to seed is gone from {file}: {old}"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(old, new))
    return workspace


def _grade(workspace, exercise, **options):
    lines = []
    outcome = grade(workspace.directory, [exercise], out=lines.append, **options)[0]
    return outcome, "\n".join(lines)


MISTAKES = {
    "assigned instead of accumulated": (
        "linear", "t02_linear.py", "self.weight.grad += d_weight", "self.weight.grad = d_weight",
        "assigned instead of accumulated: after two backward passes weight.grad holds one"),
    "sum over the wrong axis": (
        "norm", "t08_norm.py", "d_x = rstd * (d_xhat - d_xhat.mean(axis=-1, keepdims=True)",
        "d_x = rstd * (d_xhat - d_xhat.mean(axis=0, keepdims=True)",
        "a sum or mean over the wrong axis: when only the upstream gradient at"),
    "missing transpose": (
        "linear", "t02_linear.py", "d_weight = x_rows.T @ d_rows", "d_weight = d_rows.T @ x_rows",
        "shape (11, 8) is the transpose of (8, 11): a missing transpose"),
    "missing 1/sqrt(D)": (
        "attention", "t04_attention.py", "d_k = d_scores.swapaxes(-1, -2) @ q * scale",
        "d_k = d_scores.swapaxes(-1, -2) @ q",
        # size 1: d = 8, H = 2, so D = 4 and the lost factor is 1/2
        "yours is 2 times the right gradient everywhere: the factor 1/sqrt(D) = 0.5 is missing"),
    "missing mean factor": (
        "loss", "t11_loss.py", "weight = cache.counted * (d_loss / max(cache.count, 1))",
        "weight = cache.counted * d_loss",
        "the factor 1/count (the mean over counted targets)"),
    "mask left out of the backward": (
        "loss", "t11_loss.py", "weight = cache.counted * (d_loss / max(cache.count, 1))",
        "weight = np.ones(cache.counted.shape) * (d_loss / max(cache.count, 1))",
        "wrong only where the gradient must be exactly 0"),
    "sign flip": (
        "activations", "t06_activations.py", "return d_out * s * (1 + x * (1 - s))",
        "return -d_out * s * (1 + x * (1 - s))",
        "a sign flip: yours is exactly minus the right gradient"),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_each_usual_mistake_gets_its_diagnosis(tmp_path, mistake):
    exercise, file, old, new, diagnosis = MISTAKES[mistake]
    outcome, report = _grade(_seeded(tmp_path, exercise, file, old, new), exercise)
    assert outcome.status == "failing"
    assert diagnosis in report, report


def test_the_failing_tensor_and_its_worst_element_are_named(tmp_path):
    workspace = _seeded(tmp_path, "attention", "t04_attention.py", "d_q = d_scores @ k * scale",
                        "d_q = -d_scores @ k * scale")
    outcome, report = _grade(workspace, "attention")
    line = next(l for l in outcome.lines if l.strip().startswith("gradient of q: relative error"))
    assert "2.00e+00, worst at (" in line              # -g against g: |2g| / |g|
    assert "gradient of k" not in report and "gradient of v" not in report


def test_an_exception_is_reported_against_its_exercise(tmp_path):
    workspace = _seeded(tmp_path, "softmax", "t03_softmax.py", "    y = cache.y\n    # forward: y = e / sum(e).",
                        "    y = cache.why\n    # forward: y = e / sum(e).")
    outcome, report = _grade(workspace, "softmax")
    assert outcome.status == "failing"
    assert "t03_softmax.py:" in report and "in softmax_backward: AttributeError" in report
    assert "> y = cache.why" in report


def test_a_half_written_exercise_names_the_stub_left(tmp_path):
    workspace = write_workspace(tmp_path / "ws", only=["linear"])
    key = write_workspace(tmp_path / "key", only=["linear"], solutions=True)
    with open(key.path("t02_linear.py"), encoding="utf-8") as f:
        solved = f.read()
    with open(workspace.path("t02_linear.py"), encoding="utf-8") as f:
        stubbed = f.read()
    start = solved.index("def linear_backward")
    end = solved.index("class Linear(")
    mixed = stubbed[:stubbed.index("def linear_backward")] + solved[start:end] + \
        stubbed[stubbed.index("class Linear("):]
    with open(workspace.path("t02_linear.py"), "w", encoding="utf-8") as f:
        f.write(mixed)
    outcome, _ = _grade(workspace, "linear")
    assert outcome.status == "failing"
    assert outcome.lines[0].startswith("not finished: t02_linear.py:") and "in backward still raises its stub" \
        in outcome.lines[0]


def test_an_endless_loop_is_stopped_and_a_crash_contained(tmp_path):
    workspace = _seeded(tmp_path, "softmax", "t03_softmax.py", "    y = cache.y\n    # forward: y = e / sum(e).",
                        "    while True:\n        pass\n    # forward: y = e / sum(e).")
    outcome, _ = _grade(workspace, "softmax", timeout=3)
    assert outcome.status == "failing" and outcome.lines[0].startswith("stopped after 3 s")
    (tmp_path / "ws").rename(tmp_path / "looping")
    workspace = _seeded(tmp_path, "softmax", "t03_softmax.py", "    y = cache.y\n    # forward: y = e / sum(e).",
                        "    print('about to leave')\n    import os; os._exit(3)\n    # forward: y = e / sum(e).")
    outcome, report = _grade(workspace, "softmax")
    assert outcome.lines[0] == "your code ended the grading process (exit code 3)"
    assert "about to leave" in report


def test_the_library_bodies_grade_done(tmp_path):
    workspace = write_workspace(tmp_path / "ws", only=["softmax", "linear", "rope", "kv-cache"],
                                forward=True, solutions=True)
    lines = []
    outcomes = grade(workspace.directory, out=lines.append)
    assert [o.status for o in outcomes] == ["done"] * 4, "\n".join(lines)
    assert "progress: 4 of 4 done" in lines[-1]


@pytest.mark.slow
def test_every_exercise_graded_done_with_the_library_bodies_including_training(tmp_path):
    workspace = write_workspace(tmp_path / "ws", solutions=True)
    lines = []
    outcomes = grade(workspace.directory, out=lines.append)
    assert [o.status for o in outcomes] == ["done"] * len(workspace.exercises), "\n".join(lines)
    train = outcomes[-1]
    assert train.exercise.name == "train" and "held-out accuracy 100.0%" in "\n".join(train.lines)


def test_ratio_and_shape_diagnoses_by_hand():
    expected = np.array([[1.0, -2.0], [0.5, 4.0]])
    assert constant_ratio(-expected, expected) == pytest.approx(-1)
    assert constant_ratio(expected + np.eye(2), expected) is None
    assert "1/sqrt(D) = 0.5 is missing" in ratio_diagnosis(2.0, {"1/sqrt(D)": 0.5})
    assert "applied twice" in ratio_diagnosis(0.5, {"1/sqrt(D)": 0.5})
    assert "transpose" in shape_diagnosis((3, 5, 2), (3, 2, 5))
    assert "wrong axes" in shape_diagnosis((4, 7), (7,))
