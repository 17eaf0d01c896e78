"""Inside a submission's sandbox: learner's processes forked from one that has imported npformer.

The judge (``walls.sandbox``) starts this program as the sandbox's first process, with one end of
a Unix socket:

    python -I -S -c "...; from npformer.exercises.walls.zygote import main; main(FD)"

Starting Python and importing numpy, scipy and npformer costs most of a second, and a class has
an exercise of every submission to judge; so each sandbox holds one zygote. It imports the
hand-out build (``grading_build``: no exercise's reference is in it), makes itself non-dumpable
(no process of its user can trace it or read its memory), and, as pid 1 of the sandbox's PID
namespace with no signal handler of its own, takes no signal from inside it. It says ready and
answers the judge, one request at a time:

- ``start`` (with the learner's process's four pipes): fork it, with its limits; answer its pid;
- ``end``: wait a moment for it, then kill it and every process left in the sandbox
  (``kill(-1)`` from pid 1 reaches all of them), answer its exit code. Without walls, its
  session is killed instead.

Nothing a learner's process leaves behind reaches the next: it can write nowhere (the view is
read-only), start no process, and every thread of it ends with it. The zygote never runs a
learner's file itself; a learner's process answers the judge on its own pipes
(``learner_process``).
"""
from __future__ import annotations

import json
import os
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


def _child(request, fds):
    """In the forked process: become the learner's process (never returns)."""
    code = 1
    try:
        from .. import learner_process
        from .bubblewrap import Limits, limiter, no_new_processes
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
        from .unwalled import end_session
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
                _child(request, fds)
            for fd in fds:
                os.close(fd)
            send(sock, {"started": pid})
        elif request.get("op") == "end":
            send(sock, {"ended": request["pid"], "code": _end(request["pid"])})


def main(fd):
    """Import the build, become non-dumpable, say ready, serve the judge on socket ``fd``."""
    global _walled
    _walled = os.getpid() == 1                 # the sandbox's first process (bubblewrap's --as-pid-1)
    if _walled:                                # pid 1 takes no signal it has no handler for
        signal.signal(signal.SIGINT, signal.SIG_DFL)      # Python's own: Ctrl-C's KeyboardInterrupt
    sock = socket.socket(fileno=fd)
    from .bubblewrap import private, seccomp_module
    preload()
    from .. import learner_process  # noqa: F401  - imported once, here, for every child
    seccomp_module()                           # libseccomp loaded once, for every child's filter
    private()
    send(sock, {"ready": os.getpid(), "walled": _walled})
    sys.exit(serve(sock))
