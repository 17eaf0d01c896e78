"""One submission's sandbox, as the judge holds it: bubblewrap around a zygote, and its learners.

``Sandbox(submission, build)`` starts, when first needed, bubblewrap (``bubblewrap.command``) with
the zygote (``zygote``) as its first process, on a Unix socket; bubblewrap and the zygote print
into a pipe the judge reads with a cap (``CappedReader``), never into a file of the host.
``start_learner(limits, fds)`` has the zygote fork a learner's process on the four pipes the
judge made; ``end_learner(pid)`` has it end that process and everything it started. Every wait
on the zygote has a deadline; a zygote that misses one (it never runs a learner's code, so that
is npformer's failure) is ended with its sandbox, which the next exercise starts anew.
"""
from __future__ import annotations

import os
import select
import socket
import subprocess
import threading

from . import zygote
from .bubblewrap import OUTSIDE, SUBMISSION_AT, Limits, command, detect, seccomp_file, third_party
from .unwalled import unwalled_command, unwalled_environment

PROGRAM = "from npformer.exercises.walls.zygote import main; main({fd})"
STARTUP = 60.0                   # seconds a zygote may take to import the build and say ready
ANSWER = 30.0                    # seconds the zygote may take to start or end a learner's process
LOG_CAP = 64 * 1024


class SandboxError(RuntimeError):
    """The sandbox or its zygote did not start or answer (the grader's failure, never the learner's)."""


class CappedReader(threading.Thread):
    """Reads a pipe to its end, keeping the first ``cap`` bytes and counting the rest."""

    def __init__(self, stream, cap):
        super().__init__(daemon=True)
        self.stream, self.cap, self.kept, self.dropped = stream, cap, bytearray(), 0

    def run(self):
        try:
            while True:
                chunk = self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536)
                if not chunk:
                    return
                room = self.cap - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]
                self.dropped += max(0, len(chunk) - max(room, 0))
        except (OSError, ValueError):        # closed under it: the judge has moved on
            return


class Sandbox:
    """One submission's sandbox and the zygote in it, started when first needed. ``submission``:
    the folder of the copy of its files the learner's processes read."""

    def __init__(self, submission, build, isolation=None, limits=None):
        self.submission, self.build = os.path.abspath(submission), build
        self.isolation = isolation or detect()
        self.limits = limits or Limits()
        self.process = self.sock = self.log = None
        self.lock = threading.Lock()

    @property
    def walled(self):
        """True when bubblewrap keeps this sandbox."""
        return self.isolation.bwrap is not None

    @property
    def directory(self):
        """Where the learner's process finds the submission's files."""
        return SUBMISSION_AT if self.walled else self.submission

    def _start(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        program = PROGRAM.format(fd=theirs.fileno())
        keep, rules = [theirs.fileno()], None
        if self.walled:
            if self.isolation.seccomp:
                rules = seccomp_file()
                keep.append(rules.fileno())
            argv, env = command(self.isolation, self.build, self.submission, rules and rules.fileno(), program), OUTSIDE
        else:
            argv, env = unwalled_command(self.build, list(third_party()), program), unwalled_environment()
        log_read, log_write = os.pipe()
        try:
            # a session of its own: Ctrl-C at the terminal reaches the grader, which ends it
            self.process = subprocess.Popen(argv, pass_fds=keep, stdin=subprocess.DEVNULL, stdout=log_write,
                                            stderr=log_write, env=env, start_new_session=True)
        finally:
            os.close(log_write)
            theirs.close()
            if rules is not None:
                rules.close()
        self.log = CappedReader(os.fdopen(log_read, "rb"), LOG_CAP)
        self.log.start()
        self.sock = ours
        message = self._answer(STARTUP)
        if not message or "ready" not in message:
            raise SandboxError(f"the sandbox did not start:\n{self.tail()}")

    def _answer(self, seconds):
        """The zygote's next message, or None when it has none within ``seconds``."""
        ready, _, _ = select.select([self.sock], [], [], seconds)
        return zygote.receive(self.sock)[0] if ready else None

    def tail(self):
        """The last lines the sandbox's own processes printed (for the grader's failures)."""
        if self.log is None:
            return ""
        return bytes(self.log.kept)[-4000:].decode("utf-8", errors="replace")

    def alive(self):
        """True while the sandbox runs."""
        return self.process is not None and self.process.poll() is None

    def start_learner(self, limits, fds):
        """The pid (in the sandbox) of a new learner's process on ``fds`` (its requests,
        replies, output and stack pipes), under ``limits``."""
        with self.lock:
            if not self.alive():
                self._close()
                self._start()
        zygote.send(self.sock, {"op": "start", "limits": dict(limits.__dict__)}, fds)
        message = self._answer(ANSWER)
        if not message or "started" not in message:
            self.close()
            raise SandboxError(f"the zygote did not start a learner's process:\n{self.tail()}")
        return message["started"]

    def end_learner(self, pid):
        """The exit code of learner's process ``pid`` once it and all it started are gone; None
        when the sandbox itself has ended (or its zygote did not answer: then it is ended)."""
        if not self.alive():
            return None
        try:
            zygote.send(self.sock, {"op": "end", "pid": pid})
            message = self._answer(ANSWER)
        except (OSError, ValueError):
            message = None
        if not message or "code" not in message:
            self.close()
            return None
        return message["code"]

    def close(self):
        """End the sandbox: every process in it ends with its first."""
        with self.lock:
            self._close()

    def _close(self):
        if self.sock is not None:
            self.sock.close()
        if self.process is not None:
            try:
                os.killpg(self.process.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
            self.process.wait()
        if self.log is not None:
            self.log.join(timeout=2.0)
            self.log.stream.close()
        self.process = self.sock = self.log = None

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()
