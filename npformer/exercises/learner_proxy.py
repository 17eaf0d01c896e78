"""The judge's side of a learner's process: a computation whose answers come over a pipe.

The judge (``session``) never imports the learner's files. It starts a learner's process
(``learner_process``, behind the walls) and holds a ``LearnerProxy``, a computation as
``npformer.testing.computation`` defines one: ``subject(component)``, ``evaluate(build,
upstream, repeat)`` and ``claim(check)`` send the judge's own inputs to that process and read
back arrays. Everything else of the verdict (drawing and shrinking inputs, npformer's reference,
comparing, the catalogued mistakes, the properties, the claims' assertions) runs in the judge.

What comes back is read as the judge asked for it, or refused: every message within the
exercise's deadline (``Late``), in the channel's format, each answer of the form its question
takes, every value float64 (the precision the judge compares at; a reply of another dtype is
the learner's failure, named). Anything else ends the judging of the exercise (``Stopped``),
the learner's failure. Two things only the learner's process can see come back as its own
account, which can fail an exercise and never pass one: the error its code raised, and what a
backward wrote into (``SAID``).
"""
from __future__ import annotations

import os
import time

import numpy as np

from ..testing.computation import ClaimRun
from ..testing.components import component_named
from ..testing.problem import Result
from ..testing.subject import Subject
from . import channel, claim_verdicts

SAID = "said by your code, not verified"


class Stopped(BaseException):
    """The judging ends here: the learner's process broke the protocol or missed its deadline.
    Not an ``Exception``: it goes past the engine's handlers. ``reason``: a line for the report."""

    def __init__(self, reason=None):
        super().__init__(reason)
        self.reason = reason


class Gone(BaseException):
    """The learner's process ended while the judge waited for an answer."""


CHANNEL = "your code wrote a result of its own to the grader's channel"
LATE = "your code did not answer within the exercise's time"


class ReplyError(Exception):
    """A reply of the right form whose arrays are not what the judge asked for (a dtype):
    the learner's failure on that question, named in the report."""


def _value(value):
    """A float64 array, or None; ReplyError for an array of another dtype."""
    if value is None:
        return None
    if not isinstance(value, np.ndarray):
        raise channel.ChannelError("an answer that is not an array")
    if value.dtype != np.float64:
        raise ReplyError(f"your code's process returned a {value.dtype} array where the judge asked for float64")
    return value


def _values(value):
    """{name: float64 array or None} of one answer."""
    if not isinstance(value, dict):
        raise channel.ChannelError("an answer that is not a table of arrays")
    return {str(k): _value(v) for k, v in value.items()}


def _output(value):
    if isinstance(value, tuple):
        return tuple(_output(v) for v in value)
    return _value(value)


def _fact(value, depth=0):
    """A claim's fact as the judge reads one: None, an array, a text, or a table of them."""
    if value is None or isinstance(value, (np.ndarray, str)):
        return value
    if isinstance(value, dict) and depth < 2:
        return {str(k): _fact(v, depth + 1) for k, v in value.items()}
    raise channel.ChannelError("a claim's result that is not arrays")


class LearnerProxy:
    """A learner's process seen from the judge: questions out on ``to_learner``, answers in on
    ``from_learner`` (file descriptors), each wait ending at the monotonic ``deadline``."""

    def __init__(self, exercise, to_learner, from_learner, deadline=None):
        self.exercise, self.to_learner, self.from_learner = exercise, to_learner, from_learner
        self.deadline = time.monotonic() + 3600 if deadline is None else deadline
        self.stopped = None
        self.requests = 0

    def _stop(self, reason):
        self.stopped = self.stopped or reason
        raise Stopped(self.stopped)

    # -- the channel ----------------------------------------------------------------------------
    def read(self):
        """The next answer (a dict); Stopped for anything else or past the deadline, Gone at
        the pipe's end."""
        try:
            answer = channel.receive(self.from_learner, self.deadline)
        except channel.ChannelError:
            self._stop(CHANNEL)
        except channel.Late:
            self._stop(LATE)
        if answer is None:
            raise Gone()
        if not isinstance(answer, dict):
            self._stop(CHANNEL)
        return answer

    def send(self, message):
        """Send one message; Gone when the process no longer reads, Stopped past the deadline."""
        try:
            channel.send(self.to_learner, message, self.deadline)
        except channel.Late:
            self._stop(LATE)
        except OSError:
            raise Gone() from None

    def ask(self, op, **fields):
        """The learner's process's answer to one question."""
        if self.stopped:
            raise Stopped(self.stopped)
        self.requests += 1
        self.send({"op": op, **fields})
        return self.read()

    def setup(self, message):
        """Send the learner's process what it is to run; its answer says only whether its files
        load: None, or why not (where, what, a hint: texts shown to the learner, and a failure)."""
        self.send(message)
        failed = self.read().get("import_failed")
        if failed is None:
            return None
        if not (isinstance(failed, dict) and isinstance(failed.get("message"), str) and all(
                failed.get(k) is None or isinstance(failed.get(k), str) for k in ("where", "line", "hint"))):
            self._stop(CHANNEL)
        return failed

    def finish(self):
        """Tell the learner's process the judging is over (it ends by itself)."""
        try:
            channel.send(self.to_learner, {"op": "finish"}, time.monotonic() + 1.0)
        except (OSError, channel.Late):
            pass

    def close(self):
        """Close this side's ends of the two pipes."""
        for fd in (self.to_learner, self.from_learner):
            try:
                os.close(fd)
            except OSError:
                pass

    def _parsed(self, read):
        """``read()``, with any answer not of its question's form the learner's failure."""
        try:
            return read()
        except (KeyError, TypeError, channel.ChannelError):
            self._stop(CHANNEL)

    # -- the computation ------------------------------------------------------------------------
    def subject(self, component):
        """A ``Subject`` of ``component`` computed by the learner's process."""
        return RemoteSubject(component, self)

    def evaluate(self, build, upstream=None, repeat=1):
        """The ``Result`` of the fixed problem ``build`` names (``build.key`` = (case, size,
        seed)), computed by the learner's process."""
        case, size, seed = build.key
        answer = self.ask("case", case=case, size=size, seed=seed,
                          upstream=None if upstream is None else np.asarray(upstream, np.float64),
                          repeat=int(repeat))
        if "failed" in answer:
            return Result(error=self._parsed(lambda: channel.rebuilt(answer["failed"])))

        def read():
            error = answer.get("error")
            return Result(outputs=_values(answer["outputs"]), grads=_values(answer["grads"]),
                          error=None if error is None else channel.rebuilt(error),
                          protocol=_said(answer.get("protocol")))
        try:
            return self._parsed(read)
        except ReplyError as wrong:
            return Result(error=wrong)

    def claim(self, check):
        """The ``ClaimRun`` of one of the exercise's claims, run in the learner's process."""
        index = next(i for i, (_, c) in enumerate(claim_verdicts.claims_of(self.exercise.name)) if c is check)
        answer = self.ask("claim", index=index)

        def read():
            if "failed" in answer:
                return ClaimRun(error=channel.rebuilt(answer["failed"]))
            if "facts" in answer:
                return ClaimRun(facts=_fact(answer["facts"]))
            arrays = answer["arrays"]
            if not isinstance(arrays, list):
                raise channel.ChannelError("a claim's arrays that are not a list")
            return ClaimRun(arrays=[_value(a) for a in arrays])
        try:
            return self._parsed(read)
        except ReplyError as wrong:
            return ClaimRun(error=wrong)


def _said(text):
    """What the learner's process says its backward wrote into: its words, marked as such."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise channel.ChannelError("a protocol note that is not text")
    return f"{text[:500]} ({SAID})"


class RemoteSubject(Subject):
    """npformer's reference of a component, with the learner's functions in place, computed in
    the learner's process: the example's arrays go there, the results come back."""

    def __init__(self, component, proxy):
        forward, backward = component_named(component).reference_pair()
        super().__init__(component, forward, backward, name="yours")
        self.proxy = proxy

    def result(self, example):
        """``Subject.result`` computed by the learner's process."""
        self._names = example.names
        self.protocol = None
        answer = self.proxy.ask("result", component=self.component.name, names=tuple(example.names),
                                args=tuple(example.args), options=dict(example.options))
        if "failed" in answer:
            return {}, self.proxy._parsed(lambda: channel.rebuilt(answer["failed"]))

        def read():
            values = _values(answer["values"])
            error = answer.get("error")
            self.protocol = _said(answer.get("protocol"))
            return values, None if error is None else channel.rebuilt(error)
        try:
            return self.proxy._parsed(read)
        except ReplyError as wrong:
            return {}, wrong

    def _ask(self, op, **fields):
        answer = self.proxy.ask(op, component=self.component.name, **fields)
        if "failed" in answer:
            raise self.proxy._parsed(lambda: channel.rebuilt(answer["failed"]))
        if "error" in answer:
            raise self.proxy._parsed(lambda: channel.rebuilt(answer["error"]))
        return answer

    def output(self, args, options):
        """``Subject.output`` computed by the learner's process."""
        answer = self._ask("output", args=tuple(args), options=dict(options))
        return self.proxy._parsed(lambda: _output(answer["value"]))

    def gradients(self, args, options, d_out):
        """``Subject.gradients`` computed by the learner's process."""
        if not self.differentiates:
            return None
        answer = self._ask("gradients", args=tuple(args), options=dict(options), d_out=np.asarray(d_out))

        def read():
            value = answer["value"]
            if value is None:
                return None
            if not isinstance(value, tuple):
                raise channel.ChannelError("gradients that are not a tuple")
            return tuple(_value(v) for v in value)
        return self.proxy._parsed(read)
