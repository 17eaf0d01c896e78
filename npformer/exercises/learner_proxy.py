"""The judge's side of the learner's process: a subject and patches that compute over a pipe.

The judge (``session``) never imports the learner's files. It starts a learner's process
(``learner_process``, in the submission's sandbox) and holds a ``Learner``:
``learner.subject(component)`` is a ``Subject`` whose ``result``, ``output`` and ``gradients``
send the example's arrays to that process and get arrays back, and ``learner.evaluate(build,
upstream, repeat)`` answers ``problem.evaluate`` for a fixed case it rebuilds from its name, size
and seed. Everything else of the verdict (drawing and shrinking inputs, npformer's reference,
comparing, the catalogued mistakes, the properties) runs here, on what came back.

Where each verdict is computed:

- components on drawn inputs, their properties and the fixed cases: here, from arrays;
- a claim made of two halves (``check.compute`` and ``check.judge``: training the reverse
  task) computes in the learner's process and is judged here (the held-out answers are counted
  here);
- a claim whose test is a condition of its own (a gradient that must be None, a call that must
  raise) is in two halves too: the learner's process reports the facts (what was returned, or
  the builtin type and text of what was raised) and its ``judge`` decides here;
- every other claim (whole-model facts: a program over many calls of the learner's code) runs
  in the learner's process, which sends back the arrays of its assertions (``asserted``); here
  each assertion is made again, and they must be the ones npformer's own code makes (kinds,
  names, shapes, in order), so a pass or a failure is decided here (that process's own "ok" is
  not read). A failing claim is matched with the catalogue here. ``result["computed"]``
  records where each verdict was made: here, for every claim.

What the learner's process sends is checked as it is read: its messages (``channel``), then the
shape of each answer; anything else is a ``Stopped`` of its own ("your code wrote a result of its
own to the grader's channel"), the learner's failure.
"""
from __future__ import annotations

import os

import numpy as np

from ..testing.components import find
from ..testing.problem import Result
from ..testing.subject import Subject
from . import asserted, channel, claims


class Stopped(BaseException):
    """The judging ends here: the learner's process wrote what is not a message of ours.
    Not an ``Exception``: it goes past the engine's handlers. ``reason``: a line for the report."""

    def __init__(self, reason=None):
        super().__init__(reason)
        self.reason = reason


class Gone(BaseException):
    """The learner's process ended while the judge waited for an answer (it exited, crashed or
    was stopped at its time limit)."""


CHANNEL = "your code wrote a result of its own to the grader's channel"


def _array(value):
    if not isinstance(value, np.ndarray):
        raise channel.ChannelError("an answer that is not an array")
    return value


def _maybe_array(value):
    return None if value is None else _array(value)


def _arrays_or_tuple(value):
    if isinstance(value, tuple):
        return tuple(_arrays_or_tuple(v) for v in value)
    return _maybe_array(value)


def _named_arrays(value):
    if not isinstance(value, dict):
        raise channel.ChannelError("an answer that is not a table of arrays")
    return {str(k): _arrays_or_tuple(v) for k, v in value.items()}


def _text(value):
    if value is not None and not isinstance(value, str):
        raise channel.ChannelError("an answer whose text is not text")
    return value


class Learner:
    """The learner's process, seen from the judge: requests out on ``to_learner``, answers in on
    ``from_learner`` (file descriptors)."""

    def __init__(self, exercise, to_learner, from_learner):
        self.exercise, self.to_learner, self.from_learner = exercise, to_learner, from_learner
        self.stopped, self.finished = None, None
        self.sites, self._structures = {}, {}      # claim text -> where its verdict was made
        self.requests = 0

    # -- the channel ----------------------------------------------------------------------------
    def read(self):
        """The next answer; Stopped for a message that is not ours, Gone at the pipe's end."""
        try:
            answer = channel.receive(self.from_learner)
        except channel.ChannelError:
            self.stopped = self.stopped or CHANNEL
            raise Stopped(CHANNEL) from None
        if answer is None:
            raise Gone()
        if not isinstance(answer, dict):
            self.stopped = self.stopped or CHANNEL
            raise Stopped(CHANNEL)
        if answer.get("finished"):
            self.finished = answer
        return answer

    def ask(self, op, **fields):
        """The learner's process's answer to one request; Stopped when the channel broke."""
        if self.stopped:
            raise Stopped(self.stopped)
        self.requests += 1
        try:
            channel.send(self.to_learner, {"op": op, **fields})
        except (BrokenPipeError, OSError):
            raise Gone() from None
        answer = self.read()
        if answer.get("finished"):
            self.stopped = CHANNEL
            raise Stopped(CHANNEL)
        return answer

    def setup(self, message):
        """Send the learner's process what it is to run (its first message)."""
        try:
            channel.send(self.to_learner, message)
        except (BrokenPipeError, OSError):
            raise Gone() from None

    def hello(self):
        """The learner's process's first words: {"ok": True}, or why it cannot serve (its file
        does not run: where, what, a hint, each a short text)."""
        hello = self.read()
        failed = hello.get("import_failed")
        if failed is not None and not (isinstance(failed, dict) and isinstance(failed.get("message"), str) and all(
                failed.get(k) is None or isinstance(failed.get(k), str) for k in ("where", "line", "hint"))
                and (failed.get("stub") is None or type(failed.get("stub")) is int)):
            self.stopped = CHANNEL
            raise Stopped(CHANNEL)
        return hello

    def finish(self):
        """The learner's process's last words (None when it is gone or garbled them)."""
        if self.finished is None:
            try:
                channel.send(self.to_learner, {"op": "finish"})
            except OSError:
                pass
            try:
                while self.finished is None:
                    self.read()
            except (Gone, Stopped):
                return None
        return self.finished

    def close(self):
        """Close this side's ends of the two pipes."""
        for fd in (self.to_learner, self.from_learner):
            try:
                os.close(fd)
            except OSError:
                pass

    # -- the seams of the engine ------------------------------------------------------------------
    def subject(self, component):
        """A ``Subject`` of ``component`` computed by the learner's process."""
        return RemoteSubject(component, self)

    def evaluate(self, build, upstream=None, repeat=1):
        """``problem.evaluate(build, <the learner's patches>, upstream, repeat)``, computed by the
        learner's process: ``build.key`` = (case, size, seed) names the problem."""
        case, size, seed = build.key
        answer = self.ask("case", case=case, size=size, seed=seed,
                          upstream=None if upstream is None else np.asarray(upstream, np.float64),
                          repeat=int(repeat))
        if "failed" in answer:
            return Result(error=channel.rebuilt(answer["failed"]))
        try:
            error = answer.get("error")
            return Result(outputs=_named_arrays(answer["outputs"]), grads=_named_arrays(answer["grads"]),
                          error=None if error is None else channel.rebuilt(error),
                          upstream=_maybe_array(answer.get("upstream")),
                          params=tuple(str(p) for p in answer.get("params") or ()),
                          protocol=_text(answer.get("protocol")))
        except (KeyError, channel.ChannelError):
            self.stopped = CHANNEL
            raise Stopped(CHANNEL) from None

    def claim(self, check):
        """(ok, detail, error) of one of the exercise's claims, run in the learner's process."""
        index = next(i for i, (_, c) in enumerate(claims.of(self.exercise.name)) if c is check)
        answer = self.ask("claim", index=index)
        if "failed" in answer:
            error = channel.rebuilt(answer["failed"])
            return False, f"your code raised {error.described}", error
        if getattr(check, "judge", None) is not None:         # the verdict is made here
            self.sites[claims.of(self.exercise.name)[index][0]] = "judge"
            if answer.get("error") is not None:
                error = channel.rebuilt(answer["error"])
                return False, f"your code raised {error.described}", error
            computed = answer.get("computed")
            try:
                return True, check.judge(computed if isinstance(computed, dict) else {}), None
            except claims.ClaimFailed as failure:
                return False, str(failure), None
        try:
            if not isinstance(answer["ok"], bool) or not asserted.valid(answer.get("asserted")):
                raise channel.ChannelError("a claim's verdict that is not a bool, or assertions not of arrays")
            error = answer.get("error")
            ok, detail, error = answer["ok"], _text(answer.get("detail")), None if error is None else \
                channel.rebuilt(error)
        except (KeyError, channel.ChannelError):
            self.stopped = CHANNEL
            raise Stopped(CHANNEL) from None
        self.sites[claims.of(self.exercise.name)[index][0]] = "judge"
        if error is not None:                  # the learner's code raised: a fact, and a failure
            return False, detail, error
        expected = self.structure(check)
        if not expected:
            return False, "the judge could not run this claim with npformer's own code", None
        # the verdict is made here, passing or failing: the learner's "ok" is not read
        failure = asserted.rechecked(answer["asserted"], expected)
        return (False, failure, None) if failure else (True, None if not ok else detail, None)

    def structure(self, check):
        """``asserted.structure`` of the claim run here with npformer's own code ([] when it
        makes no assertion of arrays, or cannot run: then no verdict of done)."""
        from .verdict import run_claim
        if check not in self._structures:
            records = []
            with asserted.recording(check, records):
                ok, _, _ = run_claim(check, {})
            self._structures[check] = asserted.structure(records) if ok else []
        return self._structures[check]


class RemoteSubject(Subject):
    """npformer's reference of a component, with the learner's functions patched in, computed
    in the learner's process: the example's arrays go there, the results come back."""

    def __init__(self, component, learner):
        forward, backward = find(component).reference_pair()
        super().__init__(component, forward, backward, name="yours")
        self.learner = learner

    def _ask(self, op, **fields):
        answer = self.learner.ask(op, component=self.component.name, **fields)
        if "failed" in answer:
            raise channel.rebuilt(answer["failed"])
        return answer

    def result(self, example):
        """``Subject.result`` computed by the learner's process."""
        self._names = example.names
        self.protocol = None
        answer = self.learner.ask("result", component=self.component.name, names=tuple(example.names),
                                  args=tuple(example.args), options=dict(example.options))
        if "failed" in answer:
            return {}, channel.rebuilt(answer["failed"])
        try:
            values = {k: _maybe_array(v) for k, v in _named_arrays(answer["values"]).items()}
            error = answer.get("error")
            self.protocol = _text(answer.get("protocol"))
            return values, None if error is None else channel.rebuilt(error)
        except (KeyError, channel.ChannelError):
            self.learner.stopped = CHANNEL
            raise Stopped(CHANNEL) from None

    def output(self, args, options):
        """``Subject.output`` computed by the learner's process."""
        answer = self._ask("output", args=tuple(args), options=dict(options))
        try:
            if "error" in answer:
                error = channel.rebuilt(answer["error"])
            else:
                return _arrays_or_tuple(answer["value"])
        except (KeyError, channel.ChannelError):
            self.learner.stopped = CHANNEL
            raise Stopped(CHANNEL) from None
        raise error

    def gradients(self, args, options, d_out):
        """``Subject.gradients`` computed by the learner's process."""
        if not self.differentiates:
            return None
        answer = self._ask("gradients", args=tuple(args), options=dict(options), d_out=np.asarray(d_out))
        try:
            if "error" in answer:
                error = channel.rebuilt(answer["error"])
            else:
                value = _arrays_or_tuple(answer["value"])
                if value is not None and not isinstance(value, tuple):
                    raise channel.ChannelError("gradients that are not a tuple")
                return value
        except (KeyError, channel.ChannelError):
            self.learner.stopped = CHANNEL
            raise Stopped(CHANNEL) from None
        raise error
