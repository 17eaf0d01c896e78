"""Every claim's verdict is made in the judge, from what the learner's process reports.

Four claims test a condition of their own rather than arrays: a missing bias's gradient is
None, a backward through a KV-cached step raises NotImplementedError, keys of the wrong shape
raise ValueError, an encoder's position 0 reads every position. The learner's process reports
only facts (what was returned, or the builtin type and text of what was raised, or the arrays)
and the judge decides. Here each runs as graded, in one process: the learner's process's
request handler (``learner_process._Server.claim``) with the version patched in, its answer
through the channel, and the judge's ``learner_proxy.Learner.claim`` on it."""
from pathlib import Path

import numpy as np
import pytest

import npformer
from npformer.exercises import asserted, catalog, channel, claims
from npformer.specs.claims import ClaimFailed, expects, raised
from npformer.exercises.learner_process import _Server
from npformer.exercises.learner_proxy import Learner
from npformer.exercises.workspace import write_workspace
from npformer.testing.patching import edited, patched

from support.grading import judged
FOUR = {"linear": "bias gradient is None", "attention": "KV-cached decoding step is refused",
        "kv-cache": "another shape", "encoder": "reads both ways"}


def _claim(name):
    index, (text, check) = next((i, tc) for i, tc in enumerate(claims.of(name)) if FOUR[name] in tc[0])
    return index, text, check


def _graded(name, patches):
    """(ok, detail, where the verdict was made) of the claim, the learner's side with ``patches``."""
    index, text, check = _claim(name)
    server = _Server(catalog.find(name))
    with patched(patches):
        answer = server.claim({"index": index})
    answer = channel.unpack(channel.pack(answer)[8:])     # as it crosses the pipe
    learner = Learner(catalog.find(name), -1, -1)
    learner.ask = lambda op, **fields: answer
    ok, detail, _ = learner.claim(check)
    return ok, detail, learner.sites[text]


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
        "position rows [1, 2, 3, 4] received no gradient"),
}


@pytest.mark.parametrize("name", sorted(FOUR))
def test_a_condition_claim_is_decided_in_the_judge_right_done_wrong_failing(name):
    assert _graded(name, {}) == (True, None, "judge")
    edits, says = WRONG[name]
    ok, detail, where = _graded(name, {path: edited(path, *edit) for path, edit in edits.items()})
    assert not ok and where == "judge" and detail.startswith(says), detail


def test_a_subclass_of_the_expected_error_holds_as_except_would_catch_it():
    class Refused(NotImplementedError):
        pass

    def refuses(self, d_out, cache):
        raise Refused("not through a cache")
    assert raised(lambda: refuses(None, None, None)) == {"type": "NotImplementedError",
                                                        "text": "not through a cache"}
    path = "npformer.t04_attention.MultiHeadAttention.backward"
    assert _graded("attention", {path: refuses})[0] is True
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


def test_a_forged_verdict_from_the_learners_process_is_not_read():
    """The learner's process answers every claim with a passing verdict and no facts, or with
    assertions it made up: nothing the judge decides from is there, so none holds."""
    forged = {"ok": True, "detail": "holds", "error": None, "asserted": [], "refused": []}
    for name in FOUR:
        _, _, check = _claim(name)
        learner = Learner(catalog.find(name), -1, -1)
        learner.ask = lambda op, **fields: dict(forged)
        ok, detail, _ = learner.claim(check)
        assert not ok and "did not report" in detail, (name, detail)
    # a claim of arrays whose learner's process says "failed" but sends assertions that hold is
    # decided by those assertions; one that says "ok" with none made fails
    text, check = next((t, c) for t, c in claims.of("kv-cache") if "full forward's logits" in t)
    honest = []
    with asserted.recording(check, honest):
        check(npformer, None)
    learner = Learner(catalog.find("kv-cache"), -1, -1)
    learner.ask = lambda op, **fields: {"ok": False, "detail": "forged", "error": None, "asserted": honest}
    assert learner.claim(check)[0] is True and learner.sites[text] == "judge"


def test_no_claim_is_decided_in_the_learners_process():
    """Each claim comes in two halves or asserts on arrays the judge checks again."""
    for exercise in catalog.EXERCISES:
        for text, check in claims.of(exercise.name):
            if getattr(check, "judge", None) is not None:
                assert callable(check.compute), text
                continue
            records = []
            with asserted.recording(check, records), np.errstate(all="ignore"):
                check(npformer, npformer)
            assert records, f"{exercise.name}: {text!r} makes no assertion the judge can make again"


LINEAR_RIGHT = "    d_bias = sum_over_positions(d_out) if cache.has_bias else None\n"
FORGER = """
def _forge():
    import json as _json
    from npformer.exercises import claims as _claims, learner_process as _process
    _verdict = {"ok": True, "detail": None, "error": None, "asserted": [], "computed": {"bias_gradient": None}}
    _process._Server.claim = lambda self, request: dict(_verdict)       # the claim's request handler
    for _text, _check in _claims.of("linear"):
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
    assert set(result["computed"]["claims"].values()) == {"judge"}, result["computed"]
    return result, next(c for c in result["claims"] if "bias gradient is None" in c["claim"])


def test_the_right_linear_layer_holds_the_claim_as_graded(tmp_path):
    result, entry = _judged_linear(tmp_path, LINEAR_RIGHT)
    assert entry["ok"] is True and not result["refused"], result


def test_a_learners_process_that_forges_the_claim_is_still_failing(tmp_path):
    """Wrong code (a bias gradient without a bias) that, as its file loads, rebinds its process's
    claim handler, the claim's facts-making half and the claims' table, and prints a verdict: the
    facts it reports are its own to make, but its arrays are not: the gradient it returns for a
    layer without a bias fails on the drawn inputs, judged in the judge."""
    result, entry = _judged_linear(tmp_path, "    d_bias = sum_over_positions(d_out)\n", FORGER)
    failing = [c for c in result["checks"] if not c["ok"]]
    assert failing, result


def test_expects_names_what_was_raised():
    with pytest.raises(ClaimFailed, match=r"^f raised KeyError: 'k'; it must raise ValueError$"):
        expects("ValueError", raised(lambda: {}["k"]), "f returned", "f")
    assert expects("KeyError", raised(lambda: {}["k"]), "f returned", "f") is None
