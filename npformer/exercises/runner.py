"""Judges one exercise in a process the learner's code never runs in (``python -m npformer.exercises.runner``).

    python -m npformer.exercises.runner WORKSPACE EXERCISE --result-fd N [--together] [--timeout S]

This process is the judge: it never imports or executes the learner's files. It starts the
learner's process (``worker``: their functions patched into npformer, the guard installed,
its own working directory ``learner/``) and judges the exercise through it (``remote``): the
inputs are drawn, shrunk and compared here with npformer's own reference, the catalogued
mistakes are run here, and the learner's process only computes arrays on the examples it is
sent (and runs the programs of the exercise's claims, whose facts are judged here, see
``remote``). The result goes as JSON down the pipe ``N``, which the learner's process does not
hold, with the grader's secret read from stdin;
what the learner's code prints goes to fd 1 and 2, which the grader reads with a cap.
``--timeout``: the seconds the learner's process may compute (its waits for the judge are not
counted); a second before, it writes its stack to ``learner/stack.txt`` and ends.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from . import catalog
from .sandbox import private
from .worker import specs_to_judge

LEARNER_DIR = "learner"          # the learner's process's working directory, inside ours


def start_learner(directory, name, together, timeout=None):
    """(process, Learner) of a new learner's process for exercise ``name``. The engine is
    imported after it starts: both processes load npformer at once."""
    to_read, to_write = os.pipe()              # requests: we write, it reads
    answers_read, answers_write = os.pipe()     # answers: it writes, we read
    os.makedirs(LEARNER_DIR, exist_ok=True)
    here = os.path.abspath(LEARNER_DIR)
    env = {**os.environ, "TMPDIR": here, "HOME": here}
    command = [sys.executable, "-m", "npformer.exercises.worker", directory, name,
               "--requests", str(to_read), "--replies", str(answers_write),
               "--stack", os.path.join(here, "stack.txt")] + \
        (["--together"] if together else []) + (["--timeout", str(timeout)] if timeout else [])
    process = subprocess.Popen(command, cwd=here, env=env, stdin=subprocess.DEVNULL,
                               pass_fds=(to_read, answers_write))
    os.close(to_read)
    os.close(answers_write)
    from .remote import Learner
    return process, Learner(catalog.find(name), to_write, answers_read)


def _end(process):
    """Wait for the learner's process (killing it if it does not end); its exit code."""
    try:
        return process.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def _leave_as(code):
    """Exit as the learner's process did: the same signal, or its exit code (1 for 0: it ended
    before the judging did)."""
    if isinstance(code, int) and code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if isinstance(code, int) and code > 0 else 1)


def main(argv=None):
    """Judge one exercise; send the result JSON down the pipe. Exit code 0 whatever the
    learner's code did, unless its process ended before the judging did (then its code)."""
    argv = sys.argv[1:] if argv is None else argv
    directory, name = argv[:2]
    result_fd = int(argv[argv.index("--result-fd") + 1])
    together = "--together" in argv
    timeout = float(argv[argv.index("--timeout") + 1]) if "--timeout" in argv else None
    from .workspace import load_workspace
    workspace, exercise = load_workspace(directory), catalog.find(name)
    channel = os.fdopen(result_fd, "w", encoding="utf-8")
    os.set_inheritable(result_fd, False)
    token = sys.stdin.readline().strip()      # the grader's secret: a result without it is not ours
    sys.stdin.close()
    private()                  # the learner's process cannot reach into the judge
    if os.environ.get("NPFORMER_GRADE_EXAMPLES"):      # the teacher's (or a test's) number of draws
        from . import judging
        judging.EXAMPLES = int(os.environ["NPFORMER_GRADE_EXAMPLES"])
    specs_to_judge(workspace, exercise, together)      # a hand-out that names unknown files fails here
    process, learner = start_learner(workspace.directory, name, together, timeout)
    from .judging import judge_exercise
    from .remote import Gone, Stopped
    result = {"exercise": name, "checks": [], "claims": []}      # the reason is in result["refused"]
    hello = {}
    try:
        hello = learner.hello()
        if hello.get("import_failed"):               # their file does not even run: said where
            result.update(import_failed=True, error=hello["import_failed"])
        elif hello.get("ok"):
            result = judge_exercise(exercise, learner, progress="progress.txt")
    except Stopped:
        pass
    except Gone:
        _leave_as(_end(process))
    last = learner.finish() or {}
    _end(process)
    refused = list(dict.fromkeys(learner.refused))
    if learner.stopped and learner.stopped != "refused":
        refused.append(learner.stopped)
    result["refused"] = refused
    result["engine_changed"] = [str(n) for n in last.get("engine_changed") or []][:100]
    result["unguarded"] = [str(n) for n in hello.get("unguarded") or []]
    # where each verdict was made: all here, the checks and claims from the arrays and facts the
    # learner's process returned
    from . import claims
    result["computed"] = {"checks": "judge", "claims": {text: learner.sites.get(text, "judge")
                                                        for text, _ in claims.of(name)}}
    result["requests"] = learner.requests
    result["token"] = token
    channel.write(json.dumps(result))
    channel.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
