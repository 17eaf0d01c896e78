"""Inside a submission's sandbox: learner's processes forked from one that has imported npformer.

The judge (``session``) starts this program in the sandbox, with one end of a Unix socket:

    python -I -S -c "...; from npformer.exercises.zygote import main; main(FD, walled)"

Starting Python and importing numpy, scipy and npformer costs most of a second, and a class has
an exercise of every submission to judge; so each sandbox holds one zygote. It imports the
hand-out build (``grading_build``: no exercise's reference is in it), makes itself non-dumpable
so that a learner's process cannot trace it or read its memory, says ready and answers the
judge, one request at a time:

- ``start`` (with the learner's process's four pipes): fork it in a scratch folder of its own
  under the sandbox's /scratch, with its limits (``sandbox.limiter``); answer its pid;
- ``end``: wait a moment for it, then kill it and every process left in the sandbox, empty the
  scratch, answer its exit code. In a sandbox, ``kill(-1)`` reaches every process of its PID
  namespace but its first and this one; without walls, its session is killed instead.

The zygote never runs a learner's file itself; a learner's process answers the judge on its own
pipes (``learner_process``).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import sys
import time

_LENGTH = struct.Struct("<I")
MAX_REQUEST = 1 << 20


def send(sock, message, fds=()):
    """One JSON message (and ``fds``) on the socket."""
    data = json.dumps(message).encode("utf-8")
    socket.send_fds(sock, [_LENGTH.pack(len(data)) + data], list(fds))


def receive(sock, fd_count=0):
    """(message, descriptors) from the socket; (None, []) at its end."""
    data, fds, _, _ = socket.recv_fds(sock, 65536, fd_count)
    if not data:
        return None, fds
    while len(data) < _LENGTH.size + _LENGTH.unpack(data[:_LENGTH.size])[0]:
        if len(data) > MAX_REQUEST:
            raise ValueError("a message past the zygote's limit")
        more = sock.recv(65536)
        if not more:
            return None, fds
        data += more
    return json.loads(data[_LENGTH.size:]), fds


def preload():
    """Import every module of the hand-out build, so that a fork finds them loaded."""
    import importlib
    import pkgutil

    import npformer
    for module in pkgutil.walk_packages(npformer.__path__, "npformer."):
        importlib.import_module(module.name)


def _scratch(pid):
    from .sandbox import SCRATCH_AT
    return os.path.join(SCRATCH_AT if _walled else os.environ.get("TMPDIR", "/tmp"), f"learner-{pid}")


def _child(request, fds):
    """In the forked process: become the learner's process (never returns)."""
    code = 1
    try:
        from . import learner_process
        from .sandbox import Limits, limiter, no_new_processes
        requests, replies, output, stack = fds
        os.setsid()
        limiter(Limits(**request["limits"]))
        if _walled:
            no_new_processes()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        keep = sorted({0, 1, 2, requests, replies, stack})
        for low, high in zip(keep, keep[1:] + [os.sysconf("SC_OPEN_MAX")]):
            os.closerange(low + 1, high)
        here = request["scratch"]
        os.makedirs(here, mode=0o700, exist_ok=True)
        os.chdir(here)
        os.environ.update(HOME=here, TMPDIR=here)
        import tempfile
        tempfile.tempdir = None                # TMPDIR is the scratch folder now
        code = learner_process.main(requests, replies, stack)
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


def _sweep(pid):
    """Every process but this one ended: the sandbox's (``kill(-1)``), else the learner's session."""
    if _walled:
        for _ in range(100):
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                return                        # nothing left to signal
            time.sleep(0.01)
    else:
        from .sandbox import end_session
        end_session(pid)


def _end(pid):
    """The exit code of learner's process ``pid``, once it and all it started are gone."""
    status = None
    for _ in range(200):                      # it ends by itself after "finish": a moment
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    else:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, status = os.waitpid(pid, 0)
    _sweep(pid)
    shutil.rmtree(_scratch(pid), ignore_errors=True)
    if _walled:                               # what it wrote beside its own folder too
        from .sandbox import SCRATCH_AT
        for name in os.listdir(SCRATCH_AT):
            path = os.path.join(SCRATCH_AT, name)
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.unlink(path)
    return os.waitstatus_to_exitcode(status)


_walled = False


def serve(sock):
    """Answer the judge's requests until it closes the socket."""
    while True:
        request, fds = receive(sock, 4)
        if request is None:
            return 0
        if request.get("op") == "start":
            pid = os.fork()
            if pid == 0:
                sock.close()
                _child({**request, "scratch": _scratch(os.getpid())}, fds)
            for fd in fds:
                os.close(fd)
            send(sock, {"started": pid})
        elif request.get("op") == "end":
            send(sock, {"ended": request["pid"], "code": _end(request["pid"])})


def main(fd, walled):
    """Import the build, become non-dumpable, say ready, serve the judge on socket ``fd``.
    ``walled``: this runs in a sandbox of its own (its PID namespace ends with it)."""
    global _walled
    _walled = bool(walled) and os.getppid() == 1     # bubblewrap's first process is our parent
    sock = socket.socket(fileno=fd)
    from .sandbox import private
    preload()
    from . import learner_process  # noqa: F401  - imported once, here, for every child
    from .sandbox import _seccomp_module
    _seccomp_module()                          # libseccomp loaded once, for every child's filter
    private()
    send(sock, {"ready": os.getpid(), "walled": _walled})
    sys.exit(serve(sock))
