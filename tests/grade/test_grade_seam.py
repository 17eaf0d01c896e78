"""The judge decides from the arrays it asked for, compared at its own precision, and from nothing
else the code under test says: no first words, no dtype it chose, no list of parameters, no
verdict. An exercise is done only when every check it lists ran and passed.

Each test is one way a learner's process could tell the judge something instead of computing
it, tried where the judge reads it (the proxy of a learner's process, the fixed-case judge, the
report)."""
import numpy as np
import pytest

from npformer.exercises import catalog, channel
from npformer.exercises.learner_proxy import LearnerProxy, RemoteSubject, Stopped
from npformer.exercises.feedback import describe_run
from npformer.exercises.feedback import missing
from npformer.exercises.verdict import judge_exercise
from npformer.specs.example import Example
from npformer.testing.cases import CASES
from npformer.testing.computation import Patched
from npformer.testing.fixed_case import judge_case
from npformer.testing.patching import edited, reference

SOFTMAX_BACKWARD = "npformer.t03_softmax.softmax_backward"
SOFTMAX_FORWARD = "npformer.t03_softmax.softmax_forward"


def _proxy(name, answers, seconds=30.0):
    """The judge's proxy of a learner's process whose answers, ``answers`` in turn, already wait
    on its pipe (what it is asked goes to a pipe no one reads)."""
    import os
    import time
    questions_read, questions = os.pipe()
    replies, replies_write = os.pipe()
    for answer in answers:
        os.write(replies_write, channel.pack(answer))
    os.close(replies_write)
    proxy = LearnerProxy(catalog.exercise_named(name), questions, replies, time.monotonic() + seconds)
    proxy.keep = questions_read                       # open, so that sending does not fail
    return proxy


@pytest.mark.parametrize("name", [e.name for e in catalog.EXERCISES])
def test_an_empty_judgement_is_not_done(name):
    """A process that answers nothing the judge asked for (every body `return None` and a first
    message that says it cannot serve) leaves every listed check unrun: failing, not done."""
    exercise = catalog.exercise_named(name)
    empty = {"exercise": name, "checks": [], "claims": [], "error": None, "refused": []}
    unrun = missing(exercise, empty)
    assert len(unrun) == len(exercise.components) + sum(len(s) for _, s in exercise.checks) + \
        len(__import__("npformer.exercises.claim_verdicts", fromlist=["claims_of"]).claims_of(name))
    status, lines = describe_run(exercise, empty, 0, [], None, 60.0)
    assert status == "failing" and "not every check ran" in lines[0], lines


def test_the_answer_key_leaves_no_listed_check_unrun():
    exercise = catalog.exercise_named("softmax")
    result = judge_exercise(exercise, Patched())
    assert missing(exercise, result) == [] and describe_run(exercise, result, 0, [], None, 60.0)[0] == "done"


def test_the_first_words_of_a_process_decide_nothing():
    """Only an account of why its files do not load is read from the first answer; any other
    first answer ({"ok": False}, a verdict) and the judging goes on, question by question."""
    for first in ({"ok": False}, {"checks": [], "done": True}, {"import_failed": None}):
        assert _proxy("softmax", [first]).setup({"exercise": "softmax"}) is None
    said = _proxy("softmax", [{"import_failed": {"message": "SyntaxError: x", "where": "t03_softmax.py:3"}}])
    assert said.setup({})["message"] == "SyntaxError: x"
    for forged in ({"import_failed": {"message": 3}}, {"import_failed": "done"}):
        with pytest.raises(Stopped):
            _proxy("softmax", [forged]).setup({})


def test_a_process_that_stops_answering_is_late_not_waited_for():
    """An answer cut short, and no answer at all: each wait ends at the deadline."""
    import os
    import time
    questions_read, questions = os.pipe()
    replies, replies_write = os.pipe()
    os.write(replies_write, channel.pack({"values": {}})[:12])      # a message begun, never finished
    began = time.monotonic()
    proxy = LearnerProxy(catalog.exercise_named("softmax"), questions, replies, time.monotonic() + 0.5)
    with pytest.raises(Stopped, match="did not answer"):
        proxy.ask("result")
    assert time.monotonic() - began < 5
    os.close(replies_write)


def test_the_tolerance_is_the_judges_whatever_dtype_the_code_returns():
    """A softmax computing in float16 whose gradient is 0.5% off: judged at float16's tolerance
    it would pass; the judge compares at float64, as the hand-out computes, so it fails."""
    right_forward, right_backward = reference(SOFTMAX_FORWARD), reference(SOFTMAX_BACKWARD)

    def forward(x, axis=-1):
        out, cache = right_forward(x, axis)
        return out.astype(np.float16), cache

    def backward(d_out, cache):
        return right_backward(d_out, cache) * 1.005
    result = judge_exercise(catalog.exercise_named("softmax"), Patched({SOFTMAX_FORWARD: forward, SOFTMAX_BACKWARD: backward}))
    assert any(not c["ok"] for c in result["checks"]), result["checks"]


def test_a_reply_of_another_dtype_is_the_learners_failure_named():
    x = np.random.default_rng(0).standard_normal((2, 3))
    right = {"output": np.zeros((2, 3)), "gradient of x": np.zeros((2, 3))}
    subject = RemoteSubject("softmax", _proxy("softmax", [{"values": {k: v.astype(np.float16) for k, v in right.items()}},
                                                          {"values": right}]))
    values, error = subject.result(Example(("x",), (x,), {}))
    assert values == {} and "float16 array where the judge asked for float64" in str(error)
    values, error = subject.result(Example(("x",), (x,), {}))
    assert error is None and set(values) == set(right)


def test_replies_not_of_their_questions_form_stop_the_judging():
    x = np.random.default_rng(0).standard_normal((2, 3))
    for forged in ({"values": "done"}, {"values": {"output": [1.0, 2.0]}}, {"verdict": "done"},
                   {"values": {"output": {"nested": np.zeros(3)}}}):
        subject = RemoteSubject("softmax", _proxy("softmax", [forged]))
        with pytest.raises(Stopped):
            subject.result(Example(("x",), (x,), {}))


class _WithoutParameters:
    """A computation that says its module has no parameters (the old protocol asked it which
    parameters to check for accumulation)."""

    def __init__(self, code):
        self.code = code

    def evaluate(self, build, upstream=None, repeat=1):
        result = self.code.evaluate(build, upstream, repeat)
        result.params = ()
        return result


def test_accumulation_is_checked_on_the_parameters_npformers_module_has():
    """Linear.backward that assigns .grad instead of adding to it, in a process that says its
    layer has no parameters: the judge checks the parameters of its own Linear."""
    path = "npformer.t02_linear.Linear.backward"
    assigned = edited(path, "self.weight.grad += d_weight", "self.weight.grad = d_weight")
    build = lambda: CASES["Linear"](np.random.default_rng(0), 0)         # noqa: E731
    build.key = ("Linear", 0, None)
    verdict = judge_case(build, _WithoutParameters(Patched({path: assigned})))
    assert not verdict.ok and any("assigned instead of accumulated" in n for n in verdict.notes), verdict.notes
    assert judge_case(build, _WithoutParameters(Patched())).ok


# -- a learner's process in this one, its answers tampered with on the way -------------------------
def _in_process(name, tamper):
    """A proxy whose questions are answered by the learner's request handler (with npformer's
    own code in place) in this process, each answer passed through ``tamper`` and the channel."""
    from npformer.exercises.learner_process import _Server
    server = _Server(catalog.exercise_named(name))
    handlers = {"result": server.result, "output": server.output, "gradients": server.gradients,
                "case": server.case, "claim": server.claim}
    proxy = LearnerProxy(catalog.exercise_named(name), -1, -1)

    def ask(op, **fields):
        answer = handlers[op](channel.unpack(channel.pack({"op": op, **fields})[8:]))
        return channel.unpack(channel.pack(tamper(op, answer))[8:])
    proxy.ask = ask
    return proxy


def _each_array(value, change):
    if isinstance(value, np.ndarray):
        return change(value)
    if isinstance(value, dict):
        return {k: _each_array(v, change) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_each_array(v, change) for v in value)
    return value


TAMPERED = {
    "float16": lambda op, answer: _each_array(answer, lambda a: a.astype(np.float16)),
    "one element more": lambda op, answer: _each_array(answer, lambda a: np.append(a, 0.0)),
    "a scalar": lambda op, answer: _each_array(answer, lambda a: np.float64(1.0) * np.ones(())),
    "NaN": lambda op, answer: _each_array(answer, lambda a: a * np.nan),
    "nothing": lambda op, answer: {k: ({} if isinstance(v, dict) else [] if isinstance(v, list) else v)
                                   for k, v in answer.items()},
}


@pytest.mark.parametrize("how", sorted(TAMPERED))
@pytest.mark.parametrize("name", ["linear", "kv-cache", "encoder"])
def test_answers_tampered_with_are_failing_and_never_the_graders_failure(name, how, monkeypatch):
    """Whatever the learner's process does to its answers (another dtype, another shape, NaN,
    nothing at all), the judge ends with a verdict of failing: no exception of its own (which
    would be reported as the grader's failure), never done."""
    monkeypatch.setenv("NPFORMER_GRADE_EXAMPLES", "3")
    exercise = catalog.exercise_named(name)
    right = judge_exercise(exercise, _in_process(name, lambda op, answer: answer))
    assert describe_run(exercise, right, 0, [], None, 60.0)[0] == "done"
    try:
        result = judge_exercise(exercise, _in_process(name, TAMPERED[how]))
    except Stopped:
        return                                         # the protocol broken: the learner's failure
    assert describe_run(exercise, result, 0, [], None, 60.0)[0] == "failing", result


def test_the_judging_code_does_not_know_the_walls():
    """The walls live in exercises/walls/; what judges (the engine, the verdict, the proxy of a
    learner's process, the claims, the report) imports nothing of them."""
    import ast
    from pathlib import Path
    import npformer
    package = Path(npformer.__file__).parent
    judging = list((package / "testing").rglob("*.py")) + [package / "exercises" / f"{name}.py" for name in
                                                         ("verdict", "learner_proxy", "claim_verdicts", "feedback")]
    for path in judging:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        assert not [name for name in imported if "walls" in name.split(".")], path
