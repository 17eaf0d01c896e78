"""The judge and one submission: each exercise judged through a learner's process in its sandbox.

The judge is the process that grades (``npformer grade``, or one of a class's worker processes).
It never imports or runs a learner's file. For a submission it holds a ``walls.sandbox.Sandbox``
(bubblewrap around a zygote that has imported npformer's hand-out build). For each exercise,
``judge_in`` has the zygote fork a learner's process there, sends it what to run (its functions,
and npformer's own for every other exercise: ``grading_build.dependencies``), and judges the
exercise through it (``learner_proxy``: the inputs are drawn, shrunk and compared here with
npformer's reference, the catalogued mistakes run here; the learner's process only computes
arrays on the examples it is sent). Then the zygote ends that process and everything it started.

Every wait on the learner's process ends at the exercise's wall limit; past it, the sandbox is
ended and the next exercise starts a new one. What the learner's process prints is read here
with a cap; where its code was when its own time ran out comes down a pipe of its own.
"""
from __future__ import annotations

import functools
import os
import time

from . import grading_build
from .learner_proxy import LATE
from .walls.sandbox import CappedReader

STACK_CAP = 64 * 1024


@functools.lru_cache(maxsize=None)
def preload():
    """Import every npformer module, once per judge: the inputs it draws are then the same whatever
    it judged before, and the sandbox's view holds every package the build imports."""
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


def judge_in(sandbox, exercise, addresses, timeout, limits, progress=None):
    """The reply of one exercise judged in ``sandbox``: {"result": dict or None, "code": 0, the
    learner's exit code or "timeout", "output": what it printed (capped), "dropped": bytes past
    the cap, "stopped": where its code was when its time ran out}. ``result`` is None when the
    learner's process ended before the judging did. ``addresses``: the learner's functions to run.
    Every wait on the learner's process ends at the exercise's wall limit."""
    from .verdict import judge_exercise
    from .learner_proxy import Gone, LearnerProxy, Stopped
    preload()                                       # the sandbox's view holds what the build imports
    deadline = time.monotonic() + limits.wall
    pid, requests, replies, (reader, stack_reader) = _pipes(sandbox, limits)
    proxy = LearnerProxy(exercise, requests, replies, deadline)
    result, gone = {"exercise": exercise.name, "checks": [], "claims": []}, False
    try:
        failed = proxy.setup({"exercise": exercise.name, "addresses": list(addresses), "timeout": timeout,
                              "directory": sandbox.directory,
                              "dependencies": _bytes(grading_build.dependencies(addresses))})
        if failed is not None:                     # their file does not even run: said where
            result.update(import_failed=True, error={k: failed.get(k) for k in ("message", "where", "line", "hint")})
        else:
            result = judge_exercise(exercise, proxy, progress=progress)
        proxy.finish()
    except Stopped:
        pass
    except Gone:
        gone = True
    finally:                                        # the learner's process ends here, whatever happened
        late = time.monotonic() >= deadline
        code = sandbox.end_learner(pid) if not late else None
        if late:
            sandbox.close()                         # everything in it ends; the next exercise starts anew
        proxy.close()
        for piped in (reader, stack_reader):
            piped.join(timeout=2.0)                 # a process still holding the pipe is gone by now
            piped.stream.close()
    reply = {"output": bytes(reader.kept).decode("utf-8", errors="replace"), "dropped": reader.dropped,
             "stopped": stopped_at(bytes(stack_reader.kept).decode("utf-8", errors="replace"), sandbox.directory)}
    if late or reply["stopped"] or proxy.stopped == LATE:
        return {**reply, "result": None, "code": "timeout"}
    if gone:                  # as the learner's process ended: its signal or exit code (1 for 0)
        return {**reply, "result": None, "code": code or 1}
    result["refused"] = [proxy.stopped] if proxy.stopped else []
    result["requests"] = proxy.requests
    return {**reply, "result": result, "code": 0}


def _bytes(blob):
    import numpy as np
    return np.frombuffer(blob, dtype=np.uint8)
