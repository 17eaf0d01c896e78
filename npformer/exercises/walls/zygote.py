"""Inside a submission's sandbox: learner's processes forked from one that has imported npformer.

The judge (``walls.sandbox``) starts this program as the sandbox's first process, on one end of a
Unix socket. Importing numpy, scipy and npformer costs most of a second, and a class has an
exercise of every submission to judge; so the zygote imports the hand-out build once, makes
itself non-dumpable and, as pid 1 without a signal handler, takes no signal from inside. It says
ready and answers the judge, one request at a time: ``start`` (with the learner's process's four
pipes) forks a learner's process with its limits and answers its pid; ``end`` waits a moment for
it, kills every other process in the sandbox (``kill(-1)`` from pid 1; without walls, its
process group) and answers its exit code. Nothing a learner's process leaves reaches the next:
it can write nowhere, start no process, and its threads end with it. The zygote never runs a
learner's file; a learner's process answers the judge on its own pipes (``learner_process``).
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


def send(sock, message, fds=()):
    """One JSON message (and ``fds``) on the socket."""
    data = json.dumps(message).encode("utf-8")
    socket.send_fds(sock, [_LENGTH.pack(len(data)) + data], list(fds))


def receive(sock, fd_count=0):
    """(message, descriptors) from the socket; (None, []) at its end. A message is a few dozen
    bytes of JSON, sent whole."""
    data, fds, _, _ = socket.recv_fds(sock, 65536, fd_count)
    if not data:
        return None, fds
    return json.loads(data[_LENGTH.size:_LENGTH.size + _LENGTH.unpack(data[:_LENGTH.size])[0]]), fds


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
    """Every process but this one ended: the sandbox's (``kill(-1)``), else the learner's group."""
    if _walled:
        for _ in range(100):
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                return                        # nothing left to signal
            time.sleep(0.01)
    else:
        from .unwalled import end_group
        end_group(pid)


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
