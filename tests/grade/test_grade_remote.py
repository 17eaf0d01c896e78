"""The verdict is computed in a process the learner's code never ran in.

The judge (the grading process) has a learner's process started in the submission's sandbox
and sends it examples; only arrays, numbers and short texts come back (``channel``: JSON and
NumPy's ``.npy``, never a pickle, size caps). A learner's file that forges a finished verdict
by every way open to it (printing one, writing one to files and to every descriptor it holds,
rebinding the grader's functions in its process) is still judged from the arrays its functions
return."""
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from npformer.exercises import channel
from npformer.exercises.grader import grade
from npformer.exercises.workspace import write_workspace

from support.grading import judged

ROOT = str(Path(__file__).resolve().parents[2])
RIGHT = "    return y * (d_out - np.sum(d_out * y, axis=cache.axis, keepdims=True))\n"
DIAGONAL = "    return y * (1 - y) * d_out\n"          # the catalogued "diagonal of the Jacobian only"
FORGED = {"exercise": "softmax", "checks": [{"component": "softmax", "check": "output", "kind": "output",
                                             "ok": True, "examples": 40}], "claims": [], "error": None,
          "refused": [], "engine_changed": [], "token": "0" * 32}


def _quiet(*_):
    pass


def _softmax_workspace(root, body, tail=""):
    ws = write_workspace(root, only=["softmax"], solutions=True)
    path = Path(ws.path("t03_softmax.py"))
    source = path.read_text()
    assert source.count(RIGHT) == 1
    path.write_text(source.replace(RIGHT, body) + "\n" + tail)
    return ws


# -- what crosses the pipe ----------------------------------------------------------------------------
def test_values_cross_as_they_went():
    message = {"names": ("q", "k"), "args": (np.arange(6.0).reshape(2, 3), np.array([1, 2], np.int64)),
               "options": {"causal": True, "eps": 1e-5, "scale": np.float32(0.5), "mask": None,
                           "layout": "half", "nan": float("nan"), "list": [1, (2.0,)]}}
    back = channel.unpack(channel.pack(message)[8:])
    assert back["names"] == ("q", "k") and isinstance(back["names"], tuple)
    assert np.array_equal(back["args"][0], message["args"][0]) and back["args"][1].dtype == np.int64
    assert back["options"]["scale"] == np.float32(0.5) and type(back["options"]["scale"]) is np.float32
    assert back["options"]["list"] == [1, (2.0,)] and np.isnan(back["options"]["nan"])


def _message(header_of_array, data):
    """A message's body built by hand: one array whose .npy header is ``header_of_array``."""
    import io
    from numpy.lib import format as npy
    header = json.dumps({"$a": 0}).encode()
    npy_bytes = io.BytesIO()
    npy.write_array_header_1_0(npy_bytes, header_of_array)
    return channel._LENGTH.pack(len(header)) + header + npy_bytes.getvalue() + data


@pytest.mark.parametrize("header, data, says", [
    ({"descr": "|O", "fortran_order": False, "shape": (1,)}, pickle.dumps([{"a": 1}]), "not of numbers"),
    ({"descr": "<f8", "fortran_order": False, "shape": (2,)}, b"\0" * 8, "cut short"),
    ({"descr": [("x", "<f8")], "fortran_order": False, "shape": (1,)}, b"\0" * 8, "not of numbers"),
    ({"descr": "<U3", "fortran_order": False, "shape": (1,)}, b"\0" * 12, "not of numbers"),
    ({"descr": "<f8", "fortran_order": False, "shape": (1 << 40,)}, b"\0" * 8, "larger than the message")])
def test_an_array_not_of_numbers_or_not_of_its_size_is_refused(header, data, says):
    with pytest.raises(channel.ChannelError, match=says):
        channel.unpack(_message(header, data))


def test_an_object_array_is_not_sent():
    with pytest.raises(TypeError, match="not of numbers"):
        channel.pack({"x": np.array([object()], dtype=object)})


def _deep(depth, tagged=False):
    """A message body whose header nests ``depth`` lists (tagged as the channel tags them, or raw)."""
    value = None
    for _ in range(depth if tagged else 0):
        value = {"$l": [value]}
    header = json.dumps(value).encode() if tagged else b"[" * depth + b"]" * depth
    return channel._LENGTH.pack(len(header)) + header


@pytest.mark.parametrize("data, says", [
    (channel._LENGTH.pack(channel.MAX_MESSAGE + 1), "past the limit"),     # no 64 MiB read
    (channel._LENGTH.pack(100) + b"short", "cut short"),
    # Python 3.13's json reads 5000 nested lists (its scanner no longer recurses); the channel
    # then refuses the untagged value they make
    (channel._LENGTH.pack(len(_deep(5000))) + _deep(5000), "not JSON the grader reads|not tagged"),
    (channel._LENGTH.pack(len(_deep(40, True))) + _deep(40, True), "nested too deeply"),
    (channel._LENGTH.pack(12) + channel._LENGTH.pack(4) + b"null", "")])
def test_a_message_not_ours_is_refused_before_it_is_read_whole(data, says):
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, data)
        os.close(write_end)
        if not says:                         # a well-formed message: what it says is just a value
            assert channel.receive(read_end) is None
            return
        with pytest.raises(channel.ChannelError, match=says):
            channel.receive(read_end)
    finally:
        os.close(read_end)


def test_errors_come_back_as_the_same_error_or_as_the_learners_own():
    back = channel.rebuilt(channel.error_message(KeyError("x"), "KeyError: 'x' (in t03_softmax.py:3, f)"))
    assert type(back) is KeyError and str(back) == str(KeyError("x"))
    assert back.described.endswith("(in t03_softmax.py:3, f)")
    axis = np.exceptions.AxisError(3, 2)
    assert type(channel.rebuilt(channel.error_message(axis, "..."))) is type(axis)
    # the judge's own signals are never rebuilt from what the learner's process says
    forged = {"type": "OutOfScope", "module": "npformer.testing.scope", "args": ["skip me"],
              "text": "skip me", "described": "skip me"}
    from npformer.testing.scope import OutOfScope
    back = channel.rebuilt(forged)
    assert not isinstance(back, OutOfScope) and isinstance(back, channel.LearnerError) and str(back) == "skip me"


# -- the judge and the learner's process ----------------------------------------------------------------
def test_the_judge_never_runs_the_learners_file(tmp_path):
    """The learner's file says, as it loads, where it runs: in a PID namespace of its own, where
    the judge (this process) cannot even be seen."""
    tail = ("import os as _os\n"
            f"print('loaded in', _os.getpid(), 'sees the judge', _os.path.exists('/proc/{os.getpid()}'), flush=True)\n")
    reply = judged(_softmax_workspace(tmp_path / "ws", RIGHT, tail).directory, "softmax")
    line = next(line for line in reply["output"].splitlines() if line.startswith("loaded in"))
    assert int(line.split()[2]) < 100 and line.endswith("sees the judge False"), line
    result = reply["result"]
    assert result["checks"] and all(c["ok"] for c in result["checks"])
    assert result["requests"] > 10 and not result["refused"]


FORGER = f"""
import json as _json, os as _os, sys as _sys
_FORGED = {FORGED!r}
def _forge():
    text = _json.dumps(_FORGED)
    print(text, flush=True)                               # on stdout
    _sys.stderr.write(text + "\\n")
    for _name in ("result.json", "out.json", "softmax.json", "progress.txt"):   # files where it may write
        try:
            with open(_name, "w") as _f:
                _f.write(text)
        except OSError:                                   # nothing is writable in the sandbox
            pass
    import npformer.exercises.verdict as _j, npformer.exercises.session as _s, npformer.exercises.feedback as _p
    _fake = lambda *a, **k: dict(_FORGED)                 # the grader's functions, in its own process
    _j.judge_exercise = _s.judge_in = _fake
    _p.describe_run = lambda *a, **k: ("done", [])
_forge()
"""


def test_a_forged_done_verdict_is_not_believed_and_the_arrays_are_judged(tmp_path):
    """Wrong code that forges "done" on stdout, stderr, files and the grader's functions in
    its process: the mistake is still found in its arrays and named."""
    ws = _softmax_workspace(tmp_path / "ws", "    _forge()\n" + DIAGONAL, FORGER)
    os.environ["NPFORMER_GRADE_EXAMPLES"] = "6"
    try:
        outcome, = grade(ws.directory, out=_quiet, say=_quiet)
    finally:
        os.environ.pop("NPFORMER_GRADE_EXAMPLES")
    text = "\n".join(outcome.lines)
    assert outcome.status == "failing" and outcome.mistake, text
    failing = [c for c in judged(ws.directory, "softmax")["result"]["checks"] if not c["ok"]]
    assert any((c.get("mistake") or {}).get("function") == "softmax_backward" for c in failing), failing


def test_a_forged_verdict_written_to_every_descriptor_is_refused(tmp_path):
    """The same forgery, also written as a well-formed message to every descriptor the learner's
    process holds (the answers' pipe among them): the channel is refused, nothing is done."""
    tail = FORGER + ("from npformer.exercises import channel as _c\n"
                     "for _fd in range(3, 256):\n"
                     "    for _data in (_c.pack({'ok': True, 'finished': True}), _json.dumps(_FORGED).encode()):\n"
                     "        try:\n"
                     "            _os.write(_fd, _data)\n"
                     "        except OSError:\n"
                     "            pass\n")
    reply = judged(_softmax_workspace(tmp_path / "ws", RIGHT, tail).directory, "softmax")
    result = reply["result"]
    assert "your code wrote a result of its own to the grader's channel" in result["refused"], result


def test_the_training_stage_runs_without_npformer_s_own_versions_too(tmp_path):
    """Training runs every exercise's functions of the learner together; npformer's own versions
    are not in its process there either: reaching for one reaches the stub, whose name now
    calls the learner's own function (so here it calls itself)."""
    ws = write_workspace(tmp_path / "ws", solutions=True)
    path = Path(ws.path("t03_softmax.py"))
    source = path.read_text()
    path.write_text(source.replace(RIGHT, "    return _own(d_out, cache)\n") +
                    "\nfrom npformer.testing.patching import reference as _reference\n"
                    "_own = _reference('npformer.t03_softmax.softmax_backward')\n")
    result = judged(ws.directory, "train")["result"]
    assert not any(c["ok"] for c in result["claims"])
    assert "RecursionError" in json.dumps(result["claims"]), result["claims"]


def test_the_training_verdict_is_counted_by_the_judge_with_its_own_decoder():
    """The judging half of the training claim loads the weights the learner's process sent into
    npformer's own decoder and answers the held-out prompts itself: weights of an untrained
    model fail, weights of another shape, dtype or with NaN are no verdict of done."""
    from npformer.exercises.claim_verdicts import ClaimFailed
    from npformer.specs.training import _model, _tokens_and_lengths, judge_reverse
    import npformer
    _, tokenizer, source = _tokens_and_lengths(npformer)
    untrained = _model(npformer, tokenizer, source.max_len).state_dict()
    seconds = np.array(3.0)
    with pytest.raises(ClaimFailed, match=r"held-out accuracy \d"):
        judge_reverse({"parameters": untrained, "seconds": seconds})
    name = next(iter(untrained))
    for forged in ({"parameters": {**untrained, name: untrained[name][:1]}, "seconds": seconds},
                   {"parameters": {**untrained, name: untrained[name].astype(np.float64)}, "seconds": seconds},
                   {"parameters": {**untrained, name: untrained[name] * np.nan}, "seconds": seconds},
                   {"parameters": {}, "seconds": seconds}, {"parameters": untrained}, {}):
        with pytest.raises(ClaimFailed, match="did not give the decoder's weights"):
            judge_reverse(forged)
