"""A report a person reads to the end: each error and example once, with the checks it shows
in; the mistake's name first; one exercise's report a screenful however the code fails."""
import re

import numpy as np

from npformer.exercises import catalog
from npformer.exercises.grader import Outcome
from npformer.exercises.verdict import judge_exercise
from npformer.testing.computation import Patched
from npformer.exercises.feedback import REPORT_BYTES, REPORT_LINES, describe_run, format_outcome
from npformer.specs.example import Example
from npformer.testing.patching import edited

ERROR = ("ValueError: LayerNorm.backward: d_out: expected shape (1, 1, 4) (forward's output), got "
         "(4, 1, 1) (in t10_model.py:195, backward)")


def _example(weights=30):
    names = ("ids",) + tuple(f"w{i}" for i in range(weights))
    args = (np.zeros((1, 1), int),) + tuple(np.full((4, 4), 0.125 * i) + np.eye(4) for i in range(weights))
    return Example(names, args, {"n_heads": 1}).describe()


def _raising(n=30):
    """A judge's result: one error raised by every gradient of a component with ``n`` weights."""
    example = _example(n)
    checks = [{"component": "decoder_lm", "check": f"gradient of w{i}", "kind": "gradient", "ok": False,
               "examples": 40, "message": f"your implementation raised {ERROR}", "mistake": None,
               "diagnoses": [], "example": example} for i in range(n)]
    checks.append({"case": "DecoderLM", "size": 2, "ok": False, "tensors": [], "notes": [], "mistake": None,
                   "error": ERROR.replace("(1, 1, 4)", "(2, 4, 8)").replace("(4, 1, 1)", "(8, 4, 2)")})
    return {"checks": checks, "claims": []}


def test_one_error_is_said_once_with_the_checks_it_shows_in():
    status, lines = describe_run(catalog.exercise_named("model"), _raising(), 0, [], None, 120.0)
    text = "\n".join(lines)
    assert status == "failing"
    assert text.count("your code raised ValueError") == 1, text      # the case's sizes differ: one error
    assert "seen in: decoder_lm: gradient of w0, gradient of w1, gradient of w2, gradient of w3 and 26 more" \
           in text and "cases: DecoderLM (2)" in text
    assert text.count("smallest example:") == 1
    assert lines[0].startswith("your code raised ValueError")


def test_a_report_is_a_screenful_and_keeps_its_closing_count():
    exercise = catalog.exercise_named("model")
    lines = [f"finding {i}: " + "x" * 150 for i in range(400)] + ["3 of 36 checks pass; 0 of 2 claims hold",
                                                                  "your code printed:", "  hello"]
    text = format_outcome(Outcome(exercise, "failing", lines))
    assert len(text.split("\n")) <= REPORT_LINES + 1 and len(text.encode()) <= REPORT_BYTES
    assert text.split("\n")[-3:] == ["   3 of 36 checks pass; 0 of 2 claims hold", "   your code printed:",
                                     "     hello"]
    printed = text.split("\n")
    cut = next(i for i, line in enumerate(printed) if "more lines of findings not shown" in line)
    said = re.search(r"\.\.\. (\d+) more lines", printed[cut])
    every = sum(len(format_outcome(Outcome(exercise, "x", [line])).split("\n")) - 1 for line in lines[:400])
    assert (cut - 1) + int(said.group(1)) == every            # what is shown and what is not: all of it


def test_the_mistake_is_what_a_learner_reads_first():
    mistake = {"name": "softmax-diagonal-only", "function": "softmax_backward", "says": "only the diagonal",
               "recheck": "d_x = y * (d_y - sum_j d_y_j y_j)"}
    error = {"component": "softmax", "check": "gradient of x", "kind": "gradient", "ok": False, "examples": 40,
             "message": "your implementation raised ValueError: x", "mistake": None, "diagnoses": [], "example": None}
    named = {"component": "softmax", "check": "output", "kind": "output", "ok": False, "examples": 40,
             "message": "output: relative error 1", "mistake": mistake, "diagnoses": [],
             "example": "x = float64 array of shape (2,), every entry 0.125"}
    status, lines = describe_run(catalog.exercise_named("softmax"), {"checks": [error, named], "claims": []}, 0, [], None, 1.0)
    assert lines[0] == "the mistake, in softmax_backward: only the diagonal"
    assert lines.index("  smallest example:") < next(i for i, line in enumerate(lines) if "raised" in line)


def test_a_mistake_that_raises_in_a_whole_model_gives_a_short_report():
    # DecoderLM.backward handing its final norm a transposed gradient: every gradient check, every
    # fixed case and both claims raise; the report said it 2,884 lines long before it was grouped
    path = "npformer.t10_model.DecoderLM.backward"
    wrong = edited(path, "d_x = self.norm.backward(d_h, cache.norm)", "d_x = self.norm.backward(d_h.T, cache.norm)")
    exercise = catalog.exercise_named("model")
    result = judge_exercise(exercise, Patched({path: wrong}))
    status, lines = describe_run(exercise, result, 0, [], None, 120.0)
    text = format_outcome(Outcome(exercise, status, lines))
    assert status == "failing" and len(text.split("\n")) <= REPORT_LINES + 1, text
    assert text.count("LayerNorm.backward: d_out: expected shape") == 1, text


def test_one_differing_result_is_said_in_the_singular():
    """A softmax backward a little off inside the rows (each row still sums to 0, so no property
    sees it): one result differs, and the report says so in the singular."""
    def slightly_off(d_out, cache):
        y, axis = cache.y, cache.axis
        right = y * (d_out - np.sum(d_out * y, axis=axis, keepdims=True))
        return right + 1e-3 * y * (y - np.sum(y * y, axis=axis, keepdims=True))
    exercise = catalog.exercise_named("softmax")
    result = judge_exercise(exercise, Patched({"npformer.t03_softmax.softmax_backward": slightly_off}))
    status, lines = describe_run(exercise, result, 0, [], None, 1.0)
    assert status == "failing" and "softmax, on one example: 1 result differs" in lines, lines
