"""The judge and one submission: its sandbox, and each exercise judged through it.

The judge is the process that grades (``npformer grade``, or one of a class's worker processes).
It never imports or runs a learner's file. For a submission it starts a ``Sandbox``: bubblewrap
(``sandbox.command``) around a zygote (``zygote``) that has imported npformer's hand-out build.
For each exercise, ``judge_in`` has the zygote fork a learner's process there, sends it what to
run (its functions, and npformer's own for every other exercise: ``grading_build.dependencies``),
and judges the exercise through it (``learner_proxy``: the inputs are drawn, shrunk and compared
here with npformer's reference, the catalogued mistakes run here; the learner's process only
computes arrays on the examples it is sent). Then the zygote ends that process and everything it
started, and empties its scratch folder.

A learner's process past its wall time ends its sandbox with it; the next exercise starts a new
one. What the learner's process prints is read here with a cap; where its code was when its own
time ran out comes down a pipe of its own.
"""
from __future__ import annotations

import functools
import os
import select
import socket
import subprocess
import tempfile
import threading

from . import catalog, grading_build, zygote
from .sandbox import SUBMISSION_AT, CappedReader, command, detect, dies_with_parent, seccomp_file, \
    third_party, unwalled_command, unwalled_environment

ZYGOTE = "npformer.exercises.zygote"    # the program the sandbox runs
STARTUP = 60.0                     # seconds a zygote may take to import the build and say ready
STACK_CAP = 64 * 1024


class SandboxError(RuntimeError):
    """The sandbox or its zygote did not start (the grader's failure, never the learner's)."""


class Sandbox:
    """One submission's sandbox and the zygote in it, started when first needed."""

    def __init__(self, workspace, build, isolation=None, limits=None):
        from .sandbox import Limits
        self.workspace, self.build = os.path.abspath(workspace), build
        self.isolation = isolation or detect()
        self.limits = limits or Limits()
        self.process = self.sock = self.log = self.scratch = None
        self.lock = threading.Lock()              # a wall-time timer may end it from its thread

    @property
    def walled(self):
        """True when bubblewrap keeps this sandbox."""
        return self.isolation.bwrap is not None

    @property
    def directory(self):
        """Where the learner's process finds the submission's files."""
        return SUBMISSION_AT if self.walled else self.workspace

    def _start(self):
        preload()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        program = f"from {ZYGOTE} import main; main({theirs.fileno()}, {self.walled})"
        self.log = tempfile.TemporaryFile()
        keep, env, cwd, rules = [theirs.fileno()], None, None, None
        if self.walled:
            if self.isolation.seccomp:
                rules = seccomp_file()
                keep.append(rules.fileno())
            argv = command(self.isolation, self.build, self.workspace, self.limits,
                           rules.fileno() if rules else None, program)
        else:
            self.scratch = tempfile.mkdtemp(prefix="npformer-learner-")
            argv = unwalled_command(self.build, list(third_party()), program)
            env, cwd = unwalled_environment(self.scratch), self.scratch
        try:
            # a session of its own: Ctrl-C at the terminal reaches the grader, which ends it
            self.process = subprocess.Popen(argv, pass_fds=keep, stdin=subprocess.DEVNULL, stdout=self.log,
                                            stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True,
                                            preexec_fn=dies_with_parent())
        finally:
            theirs.close()
            if rules is not None:
                rules.close()
        self.sock = ours
        ready, _, _ = select.select([ours], [], [], STARTUP)
        message = zygote.receive(ours)[0] if ready else None
        if not message or "ready" not in message:
            raise SandboxError(f"the sandbox did not start:\n{self.tail()}")

    def tail(self):
        """The last lines the sandbox's own processes printed (for the grader's failures)."""
        if self.log is None:
            return ""
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:].decode("utf-8", errors="replace")

    def alive(self):
        """True while the sandbox runs."""
        return self.process is not None and self.process.poll() is None

    def start_learner(self, limits, fds):
        """The pid (in the sandbox) of a new learner's process on ``fds`` (its requests,
        replies, output and stack pipes), under ``limits``."""
        if not self.alive():
            with self.lock:
                self._close()
                self._start()
        zygote.send(self.sock, {"op": "start", "limits": dict(limits.__dict__)}, fds)
        message, _ = zygote.receive(self.sock)
        if not message or "started" not in message:
            raise SandboxError(f"the zygote did not start a learner's process:\n{self.tail()}")
        return message["started"]

    def end_learner(self, pid):
        """The exit code of learner's process ``pid`` once it and all it started are gone; None
        when the sandbox itself has ended (a learner's code that killed it, or its wall time)."""
        if not self.alive():
            return None
        try:
            zygote.send(self.sock, {"op": "end", "pid": pid})
            message, _ = zygote.receive(self.sock)
        except OSError:
            message = None
        return message["code"] if message and "code" in message else None

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
            self.log.close()
        if self.scratch is not None:
            import shutil
            shutil.rmtree(self.scratch, ignore_errors=True)
        self.process = self.sock = self.log = self.scratch = None

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()


@functools.lru_cache(maxsize=None)
def preload():
    """Import every npformer module, once per judge: the inputs it draws for an exercise are then
    the same whichever exercises it judged before, and the sandbox's view holds every package
    the build imports (``sandbox.third_party``)."""
    import importlib
    import pkgutil

    import npformer
    for module in pkgutil.walk_packages(npformer.__path__, "npformer."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    return True


def stopped_at(stack, directory):
    """ "softmax_backward (t03_softmax.py:52)": where the learner's code was when its time ran
    out, read from the stack its process wrote; None when it is not in their files."""
    for line in stack.splitlines():
        line = line.strip()
        if line.startswith("File ") and directory in line:
            path_part, _, rest = line[len('File "'):].partition('", line ')
            number, _, function = rest.partition(" in ")
            return f"{function} ({os.path.basename(path_part)}:{number})"
    return None


def _pipes(sandbox, limits):
    """(the learner's process's pid in the sandbox, the judge's end of its requests pipe, of its
    replies pipe, and the readers of its output and of its stack), once it is started."""
    requests_read, requests = os.pipe()           # the judge asks, the learner's process reads
    replies, replies_write = os.pipe()            # it answers, the judge reads
    output_read, output = os.pipe()               # what it prints
    stack_read, stack = os.pipe()                 # where it was when its time ran out
    theirs = (requests_read, replies_write, output, stack)
    try:
        pid = sandbox.start_learner(limits, theirs)
    except BaseException:
        for fd in (requests, replies, output_read, stack_read):
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    readers = (CappedReader(os.fdopen(output_read, "rb"), limits.output),
               CappedReader(os.fdopen(stack_read, "rb"), STACK_CAP))
    for reader in readers:
        reader.start()
    return pid, requests, replies, readers


def judge_in(sandbox, exercise, specs, timeout, limits, progress=None):
    """The reply of one exercise judged in ``sandbox``: {"result": dict or None, "code": 0, the
    learner's exit code or "timeout", "output": what it printed (capped), "dropped": bytes past
    the cap, "stopped": where its code was when its time ran out}. ``result`` is None when the
    learner's process ended before the judging did. ``specs``: the learner's functions to run."""
    from .verdict import judge_exercise
    from .learner_proxy import Gone, Learner, Stopped
    pid, requests, replies, (reader, stack_reader) = _pipes(sandbox, limits)
    learner = Learner(exercise, requests, replies)
    fired = threading.Event()

    def too_long():
        fired.set()
        sandbox.close()                           # everything in it ends; the next exercise starts anew
    watch = threading.Timer(limits.wall, too_long)
    watch.daemon = True
    watch.start()
    result, gone = {"exercise": exercise.name, "checks": [], "claims": []}, False
    try:
        learner.setup({"exercise": exercise.name, "specs": list(specs), "timeout": timeout,
                       "directory": sandbox.directory,
                       "dependencies": _bytes(grading_build.dependencies(specs))})
        hello = learner.hello()
        if hello.get("import_failed"):              # their file does not even run: said where
            result.update(import_failed=True, error=hello["import_failed"])
        elif hello.get("ok"):
            result = judge_exercise(exercise, learner, progress=progress)
        learner.finish()
    except Stopped:
        pass
    except Gone:
        gone = True
    finally:                                        # the learner's process ends here, whatever happened
        watch.cancel()
        code = sandbox.end_learner(pid) if not fired.is_set() else None
        learner.close()
        for piped in (reader, stack_reader):
            piped.join(timeout=2.0)                 # a process still holding the pipe is gone by now
            piped.stream.close()
    reply = {"output": bytes(reader.kept).decode("utf-8", errors="replace"), "dropped": reader.dropped,
             "stopped": stopped_at(bytes(stack_reader.kept).decode("utf-8", errors="replace"), sandbox.directory)}
    if fired.is_set() or reply["stopped"]:
        return {**reply, "result": None, "code": "timeout"}
    if gone:                  # as the learner's process ended: its signal or exit code (1 for 0)
        return {**reply, "result": None, "code": code or 1}
    _account(result, learner, exercise.name)
    return {**reply, "result": result, "code": 0}


def _bytes(blob):
    import numpy as np
    return np.frombuffer(blob, dtype=np.uint8)


def _account(result, learner, name):
    """What broke the channel, if anything, and where each verdict was made."""
    result["refused"] = [learner.stopped] if learner.stopped else []
    from . import claims
    result["computed"] = {"checks": "judge", "claims": {text: learner.sites.get(text, "judge")
                                                        for text, _ in claims.of(name)}}
    result["requests"] = learner.requests
