"""Every claim's verdict is made in the judge, from arrays the learner's process computed.

A claim's program runs in the learner's process with their code; only its arrays come back
(those its assertions were given, or for a claim in two halves what its ``compute`` half
returned), and the judge asserts them among themselves and against the same program run with
npformer's own code (``claim_verdicts.decide``). Two claims test what only the learner's process can
see (a call that must raise): their account is shown as said, can fail the exercise and never
counts toward done. Here each runs as graded, in one process: the learner's process's request
handler (``learner_process._Server.claim``) with the version patched in, its answer through the
channel, the judge's ``LearnerProxy.claim`` on it, and ``claim_verdicts.decide``."""
from pathlib import Path

import numpy as np
import pytest

from npformer.exercises import catalog, channel, claim_verdicts
from npformer.exercises.learner_process import _Server
from npformer.exercises.learner_proxy import LearnerProxy, Stopped
from npformer.exercises.verdict import ours
from npformer.exercises.workspace import write_workspace
from npformer.specs.claims import ClaimFailed, expects, raised
from npformer.testing.computation import Patched
from npformer.testing.patching import edited, patched

from support.grading import judged

FOUR = {"linear": "bias gradient is None", "attention": "KV-cached decoding step is refused",
        "kv-cache": "another shape", "encoder": "reads both ways"}


def _claim(name, words=None):
    index, (text, check) = next((i, tc) for i, tc in enumerate(claim_verdicts.claims_of(name)) if (words or FOUR[name]) in tc[0])
    return index, text, check


def _proxy(name, answer):
    """The judge's proxy of a learner's process that answers ``answer`` to every question."""
    proxy = LearnerProxy(catalog.exercise_named(name), -1, -1)
    proxy.ask = lambda op, **fields: channel.unpack(channel.pack(answer)[8:])     # as it crosses the pipe
    return proxy


def _graded(name, patches, words=None):
    """The judge's ``Decision`` on the claim, the learner's side with ``patches``."""
    index, _, check = _claim(name, words)
    server = _Server(catalog.exercise_named(name))
    with patched(patches):
        answer = server.claim({"index": index})
    return claim_verdicts.decide(check, _proxy(name, answer).claim(check), ours(check))


WRONG = {
    "linear": ({"npformer.t02_linear.linear_backward": (
        "d_bias = sum_over_positions(d_out) if cache.has_bias else None", "d_bias = sum_over_positions(d_out)")},
        "linear_backward returned a bias gradient for a layer without a bias"),
    "attention": ({"npformer.t04_attention.MultiHeadAttention.backward": (
        "if cache.cached_decode:", "if False:")}, "backward ran through a KV-cached decoding step"),
    "kv-cache": ({"npformer.t13_kv_cache.LayerKV.write": (
        "raise ValueError(", "raise TypeError(")},
        "LayerKV.write of keys of shape (2, 1, 1, 3) in a cache of 2 heads raised TypeError: kv_cache:"),
    "encoder": ({"npformer.t15_encoder.Encoder.backward": (
        "return self.embed.backward(d_x, cache.embed)",
        "return self.embed.backward(d_x * (np.arange(d_x.shape[1]) == 0)[:, None], cache.embed)")},
        "position_gradient (against npformer's)"),
}
SAID_ONLY = {"attention", "kv-cache"}          # what a call raised: only the learner's process sees it


@pytest.mark.parametrize("name", sorted(FOUR))
def test_a_condition_claim_is_decided_in_the_judge_right_holds_wrong_fails(name):
    right = _graded(name, {})
    assert right.ok and right.verified is (name not in SAID_ONLY), vars(right)
    edits, says = WRONG[name]
    wrong = _graded(name, {path: edited(path, *edit) for path, edit in edits.items()})
    assert not wrong.ok and wrong.detail.startswith(says), wrong.detail


def test_a_subclass_of_the_expected_error_holds_as_except_would_catch_it():
    class Refused(NotImplementedError):
        pass

    def refuses(self, d_out, cache):
        raise Refused("not through a cache")
    assert raised(lambda: refuses(None, None, None)) == {"type": "NotImplementedError",
                                                        "text": "not through a cache"}
    path = "npformer.t04_attention.MultiHeadAttention.backward"
    assert _graded("attention", {path: refuses}).ok is True
    # a class that only names itself after a builtin is not one
    fake = type("ValueError", (Exception,), {"__module__": "builtins"})
    assert raised(lambda: (_ for _ in ()).throw(fake("x")))["type"] == "Exception"


@pytest.mark.parametrize("facts, says", [
    ({}, "did not report whether"), ({"raised": "NotImplementedError"}, "did not report whether"),
    ({"raised": None}, "it must raise NotImplementedError"),
    ({"raised": {"type": "TypeError", "text": "t"}}, "raised TypeError: t; it must raise")])
def test_facts_not_of_the_claim_are_no_pass(facts, says):
    with pytest.raises(ClaimFailed, match=says):
        _claim("attention")[2].judge(facts)


@pytest.mark.parametrize("name", sorted(FOUR))
def test_a_forged_verdict_from_the_learners_process_is_not_read(name):
    """Answers that are not the arrays the judge asked for (a verdict, flags, a detail) break
    the protocol: the judging of the exercise stops there, the learner's failure."""
    _, _, check = _claim(name)
    for forged in ({"ok": True, "detail": "holds", "error": None}, {"computed": {"bias_gradient": None}},
                   {"arrays": "all of them"}, {"facts": {"a": {"b": {"c": {"d": 1}}}}}):
        with pytest.raises(Stopped):
            _proxy(name, forged).claim(check)


def test_arrays_made_up_to_agree_with_each_other_are_held_to_npformers():
    """The KV cache claim compares cached logits with the full forward's: a process that sends
    the same made-up array for both sides, or npformer's arrays but one cut short, fails in
    the judge, which ran the claim with npformer's own code."""
    _, text, check = _claim("kv-cache", "full forward's logits")
    right = ours(check)
    assert [r["kind"] for r in right.records] == ["close"]
    logits = right.records[0]["arrays"][0]
    made_up = np.zeros_like(logits)
    for arrays, says in (([made_up, made_up], "against npformer's"), ([logits], "computed 1 arrays"),
                         ([logits, logits[:, :3]], "npformer's computes 2")):
        decision = claim_verdicts.decide(check, _proxy("kv-cache", {"arrays": arrays}).claim(check), right)
        assert not decision.ok and says in decision.detail, decision.detail
    assert claim_verdicts.decide(check, _proxy("kv-cache", {"arrays": right.arrays}).claim(check), right).ok


def test_an_array_of_another_dtype_is_the_learners_failure_named():
    _, _, check = _claim("kv-cache", "full forward's logits")
    right = ours(check)
    half = [a.astype(np.float16) for a in right.arrays]
    decision = claim_verdicts.decide(check, _proxy("kv-cache", {"arrays": half}).claim(check), right)
    assert not decision.ok and "float16 array where the judge asked for float64" in decision.detail


def test_no_claim_is_decided_in_the_learners_process():
    """Each claim comes in two halves, or asserts on arrays the judge compares with its own."""
    for exercise in catalog.EXERCISES:
        for text, check in claim_verdicts.claims_of(exercise.name):
            if getattr(check, "judge", None) is not None:
                assert callable(check.compute), text
                continue
            run = Patched().claim(check)
            assert run.error is None and run.records, \
                f"{exercise.name}: {text!r} makes no assertion the judge can make again"


LINEAR_RIGHT = "    d_bias = sum_over_positions(d_out) if cache.has_bias else None\n"
FORGER = """
def _forge():
    import json as _json
    from npformer.exercises import claim_verdicts as _claims, learner_process as _process
    _verdict = {"ok": True, "detail": None, "error": None, "asserted": [], "computed": {"bias_gradient": None}}
    _process._Server.claim = lambda self, request: dict(_verdict)       # the claim's request handler
    for _text, _check in _claims.claims_of("linear"):
        if getattr(_check, "compute", None) is not None:
            _check.compute = lambda L: {"bias_gradient": None}           # the facts, made up
    _claims.CLAIMS["linear"][:] = [(t, lambda L, R: None) for t, _ in _claims.CLAIMS["linear"]]
    print(_json.dumps({"claims": [{"claim": "without a bias, the bias gradient is None", "ok": True}]}),
          flush=True)
_forge()
"""


def _judged_linear(tmp_path, body, tail=""):
    """The judge's result for a linear workspace whose bias line is ``body``, graded in a sandbox."""
    ws = write_workspace(tmp_path / "ws", only=["linear"], solutions=True)
    path = Path(ws.path("t02_linear.py"))
    source = path.read_text()
    assert source.count(LINEAR_RIGHT) == 1
    path.write_text(source.replace(LINEAR_RIGHT, body) + tail)
    result = judged(ws.directory, "linear")["result"]
    return result, next((c for c in result["claims"] if "bias gradient is None" in c["claim"]), None)


def test_the_right_linear_layer_holds_the_claim_as_graded(tmp_path):
    result, entry = _judged_linear(tmp_path, LINEAR_RIGHT)
    assert entry["ok"] is True and not result["refused"], result


def test_a_learners_process_that_forges_the_claim_is_still_failing(tmp_path):
    """Wrong code (a bias gradient without a bias) that, as its file loads, rebinds its process's
    claim handler, the claim's facts-making half and the claims' table, and prints a verdict: the
    facts it reports are its own to make, but its arrays are not: the gradient it returns for a
    layer without a bias fails on the drawn inputs, judged in the judge."""
    result, entry = _judged_linear(tmp_path, "    d_bias = sum_over_positions(d_out)\n", FORGER)
    failing = [c for c in result["checks"] + result["claims"] if not c["ok"]]
    assert failing or result["refused"], result


def test_expects_names_what_was_raised():
    with pytest.raises(ClaimFailed, match=r"^f raised KeyError: 'k'; it must raise ValueError$"):
        expects("ValueError", raised(lambda: {}["k"]), "f returned", "f")
    assert expects("KeyError", raised(lambda: {}["k"]), "f returned", "f") is None
