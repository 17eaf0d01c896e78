"""Learner's processes started by fork from one that has already imported npformer.

    python -m npformer.exercises.nursery --socket FD

Starting Python and importing numpy, scipy and npformer costs most of a second; a class has
that for every exercise of every submission. The judge starts one nursery instead: it imports
all of npformer once, never runs a learner's file, holds nothing of the judging (no reference
results, no secret), and is non-dumpable (a learner's process cannot ptrace it to change what
the next one starts with). For each learner's process the judge sends, over a Unix socket,
the worker's arguments, its directory and environment, its limits, and three file descriptors
(the two pipes of ``worker`` and the pipe its fd 1 and 2 write to). The nursery forks; the
child starts a session of its own, takes the limits (``sandbox.limiter``), closes every other
descriptor and runs ``worker.main``. The nursery reports the child's pid, and its exit code
when it ends.

``Nursery`` is the judge's side; ``Child`` looks like the ``subprocess.Popen`` it replaces
(``pid``, ``wait``, ``kill``).
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time

_LENGTH = struct.Struct("<I")
MAX_MESSAGE = 1 << 20


def _send(sock, message, fds=()):
    data = json.dumps(message).encode("utf-8")
    data = _LENGTH.pack(len(data)) + data
    sent = socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
    if sent < len(data):
        sock.sendall(data[sent:])


def _request(sock):
    """(request, its three descriptors) from the judge; (None, []) at the socket's end. The
    judge sends one and waits for its answer: a read never holds two."""
    data, fds, _, _ = socket.recv_fds(sock, 65536, 3)
    if not data:
        return None, fds
    while len(data) < _LENGTH.size + _LENGTH.unpack(data[:_LENGTH.size])[0]:
        if len(data) > MAX_MESSAGE:
            raise ValueError("a request past the nursery's limit")
        more = sock.recv(65536)
        if not more:
            return None, fds
        data += more
    return json.loads(data[_LENGTH.size:]), fds


# -- the nursery's side -------------------------------------------------------------------------
def _child(request, fds):
    """In the forked child: become the learner's process of ``request`` (never returns)."""
    code = 1
    try:
        from . import worker
        from .sandbox import Limits, limiter, make_dumpable
        requests, replies, output = fds
        os.setsid()
        limiter(Limits(**request["limits"]), request["tasks"])()
        make_dumpable()                       # like a process started afresh (it holds nothing of ours)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        keep = sorted({0, 1, 2, requests, replies})
        for low, high in zip(keep, keep[1:] + [os.sysconf("SC_OPEN_MAX")]):
            os.closerange(low + 1, high)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import tempfile
        tempfile.tempdir = None                # TMPDIR is the learner's directory now
        sys.path[0] = os.getcwd()              # as ``python -m`` run there would have it
        argv = list(request["argv"])
        argv[argv.index("--requests") + 1] = str(requests)
        argv[argv.index("--replies") + 1] = str(replies)
        code = worker.main(argv)
    except SystemExit as leaving:             # the learner's code called sys.exit: as Python ends
        code = leaving.code if isinstance(leaving.code, int) else 0 if leaving.code is None else 1
        if not isinstance(leaving.code, int) and leaving.code is not None:
            print(leaving.code, file=sys.stderr)
    except BaseException:                     # noqa: BLE001 - as Python would end: its traceback
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:                  # noqa: BLE001 - a stream the learner's code closed
                pass
        os._exit(code if isinstance(code, int) and 0 <= code < 256 else 1)


def serve(sock):
    """Fork a learner's process for each request; report each child's pid, then its exit."""
    children = set()
    while True:
        ready, _, _ = select.select([sock], [], [], 0.05)
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                _send(sock, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})
        if not ready:
            continue
        request, fds = _request(sock)
        if request is None:
            return 0
        pid = os.fork()
        if pid == 0:
            sock.close()
            _child(request, fds)
        for fd in fds:
            os.close(fd)
        children.add(pid)
        _send(sock, {"started": pid})


def main(argv=None):
    """Import npformer, become non-dumpable, say ready, then serve the judge's socket."""
    argv = sys.argv[1:] if argv is None else argv
    sock = socket.socket(fileno=int(argv[argv.index("--socket") + 1]))
    from .guard import preload
    from .sandbox import private
    private()
    preload()
    from . import worker  # noqa: F401  - imported once, here, for every child
    _send(sock, {"ready": os.getpid()})
    return serve(sock)


# -- the judge's side ---------------------------------------------------------------------------
class Child:
    """A learner's process started by the nursery; its exit code comes through the nursery."""

    def __init__(self, nursery, pid):
        self.nursery, self.pid, self.returncode = nursery, pid, None

    def wait(self, timeout=None):
        """The exit code; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        end = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("learner's process", timeout)
            if not self.nursery._collect(0.25 if left is None else min(left, 0.25)):
                self.returncode = self.returncode if self.returncode is not None else -signal.SIGKILL
        return self.returncode

    def kill(self):
        """SIGKILL to it (it may have ended already)."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Nursery:
    """The judge's nursery process, started on first use."""

    def __init__(self, env=None, cwd=None):
        self.env, self.cwd = env, cwd
        self.process = self.sock = None
        self.children, self.buffer, self.gone = {}, b"", False

    def _start(self):
        from .sandbox import dies_with_parent
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.process = subprocess.Popen([sys.executable, "-m", "npformer.exercises.nursery", "--socket",
                                         str(theirs.fileno())], pass_fds=(theirs.fileno(),), env=self.env,
                                        cwd=self.cwd, stdin=subprocess.DEVNULL, preexec_fn=dies_with_parent())
        theirs.close()
        self.sock, self.buffer = ours, b""
        message = self._next(None)
        if not message or "ready" not in message:
            raise RuntimeError("the nursery did not start")

    def _next(self, timeout):
        """The nursery's next report; None at its end, or when ``timeout`` seconds pass first."""
        while True:
            if len(self.buffer) >= _LENGTH.size:
                size = _LENGTH.unpack(self.buffer[:_LENGTH.size])[0]
                if len(self.buffer) >= _LENGTH.size + size:
                    message = json.loads(self.buffer[_LENGTH.size:_LENGTH.size + size])
                    self.buffer = self.buffer[_LENGTH.size + size:]
                    return message
            ready, _, _ = select.select([self.sock], [], [], timeout)
            if not ready:
                return None
            data = self.sock.recv(65536)
            if not data:
                self.gone = True
                return None
            self.buffer += data

    def spawn(self, argv, cwd, env, limits, tasks, fds):
        """A ``Child`` running ``worker.main(argv)`` in ``cwd`` with ``env`` under ``limits``
        (a dict of ``sandbox.Limits``); ``fds``: its requests, replies and output descriptors
        (the ``--requests`` and ``--replies`` of ``argv`` are renumbered to them)."""
        if self.process is None or self.process.poll() is not None:
            self.close()
            self._start()
        _send(self.sock, {"argv": argv, "cwd": cwd, "env": env, "limits": limits, "tasks": tasks}, fds)
        while True:
            message = self._next(None)
            if message is None:
                raise RuntimeError("the nursery ended")
            if "started" in message:
                child = Child(self, message["started"])
                self.children[child.pid] = child
                return child
            self._exited(message)

    def _exited(self, message):
        child = self.children.pop(message.get("exited"), None)
        if child is not None:
            child.returncode = message["code"]

    def _collect(self, timeout):
        """Read the nursery's reports for up to ``timeout`` seconds; False when it is gone."""
        self.gone = False
        message = self._next(timeout)
        if message is not None:
            self._exited(message)
        return not self.gone

    def close(self):
        """End the nursery (the learner's processes it started die with it)."""
        if self.sock is not None:
            self.sock.close()
        if self.process is not None:
            try:
                self.process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = self.sock = None


if __name__ == "__main__":
    sys.exit(main())
