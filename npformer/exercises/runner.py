"""The judge: a process the learner's code never runs in, judging one exercise after another.

    python -m npformer.exercises.runner --serve --result-fd N
    python -m npformer.exercises.runner WORKSPACE EXERCISE --result-fd N [--together] [--timeout S]

This process never imports or executes the learner's files. For each job it starts a new
learner's process (``worker``: their functions of that one exercise patched into npformer, the
guard installed, a working directory of its own), forked by its ``nursery``, under the job's
limits (``sandbox``), judges
the exercise through it (``remote``: the inputs are drawn, shrunk and compared here with
npformer's own reference, the catalogued mistakes run here; the learner's process only
computes arrays on the examples it is sent, and the facts of the claims), then ends that
process and everything it started.

``--serve``: the grader keeps one judge per core for a whole grading session (one workspace,
or a class). Jobs come as JSON lines on stdin, each with the grader's secret; each reply goes
down the pipe ``N``, which no learner's process holds, as one frame (``wire``): the result,
how the learner's process ended, and what it printed (capped at the pipe). Importing npformer,
the engine and the catalogue happens once per judge, not once per exercise. The second form
judges one exercise (the secret read from stdin), writes its result JSON to ``N`` and copies
what the learner's code printed to its own stdout.

Every npformer module is imported before the first input is drawn: the inputs drawn for an
exercise are then the same whichever exercises this judge judged before.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import traceback

from . import catalog
from .nursery import Nursery
from .sandbox import CappedReader, Limits, end_session, private, user_tasks

LEARNER_DIR = "learner"          # the learner's process's working directory, inside the job's


def start_learner(nursery, job, limits):
    """(process, Learner, output reader) of a new learner's process for ``job``, forked by
    ``nursery``: in a session of its own, under ``limits``, its fd 1 and 2 read with a cap."""
    to_read, to_write = os.pipe()              # requests: we write, it reads
    answers_read, answers_write = os.pipe()     # answers: it writes, we read
    output_read, output_write = os.pipe()       # what it prints
    here = os.path.abspath(os.path.join(job["scratch"], LEARNER_DIR))
    os.makedirs(here, exist_ok=True)
    argv = [job["workspace"], job["exercise"], "--requests", str(to_read), "--replies", str(answers_write),
            "--stack", os.path.join(here, "stack.txt")] + \
        (["--together"] if job.get("together") else []) + \
        (["--timeout", str(job["timeout"])] if job.get("timeout") else [])
    try:
        process = nursery.spawn(argv, here, {**os.environ, "TMPDIR": here, "HOME": here},
                                dict(limits.__dict__), user_tasks(), (to_read, answers_write, output_write))
    finally:
        for fd in (to_read, answers_write, output_write):
            os.close(fd)
    reader = CappedReader(os.fdopen(output_read, "rb"), limits.output)
    reader.start()
    from .remote import Learner
    return process, Learner(catalog.find(job["exercise"]), to_write, answers_read), reader


def _end(process):
    """Wait for the learner's process (killing it if it does not end); its exit code."""
    try:
        return process.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait(timeout=5.0)


class _Watch:
    """Ends the learner's process and its session after ``wall`` seconds of the job."""

    def __init__(self, process, wall):
        self.fired = False
        self.timer = threading.Timer(wall, self._fire, args=(process.pid,))
        self.timer.daemon = True
        self.timer.start()

    def _fire(self, pid):
        self.fired = True
        end_session(pid)

    def stop(self):
        self.timer.cancel()


def judge_job(job, nursery):
    """The reply to one job: {"result": dict or None, "code": 0, the learner's exit code or
    "timeout", "output": what it printed (capped), "dropped": bytes past the cap, "token"}.
    ``result`` is None when the learner's process ended before the judging did."""
    from .judging import judge_exercise
    from .remote import Gone, Stopped
    from .workspace import load_workspace
    from .worker import specs_to_judge
    name = job["exercise"]
    workspace, exercise = load_workspace(job["workspace"]), catalog.find(name)
    specs_to_judge(workspace, exercise, job.get("together"))   # a hand-out naming unknown files fails here
    limits = Limits(**job.get("limits", {}))
    process, learner, reader = start_learner(nursery, job, limits)
    watch = _Watch(process, limits.wall)
    result = {"exercise": name, "checks": [], "claims": []}      # the reason is in result["refused"]
    hello, last, gone = {}, {}, False
    try:
        hello = learner.hello()
        if hello.get("import_failed"):               # their file does not even run: said where
            result.update(import_failed=True, error=hello["import_failed"])
        elif hello.get("ok"):
            result = judge_exercise(exercise, learner, progress=os.path.join(job["scratch"], "progress.txt"))
        last = learner.finish() or {}
    except Stopped:
        last = learner.finish() or {}
    except Gone:
        gone = True
    finally:                                  # the learner's process ends here, whatever happened
        code = _end(process)
        watch.stop()
        end_session(process.pid)              # its children too, whatever it did with them
        learner.close()
        reader.join(timeout=2.0)
        reader.stream.close()
    reply = {"output": bytes(reader.kept).decode("utf-8", errors="replace"), "dropped": reader.dropped,
             "token": job.get("token")}
    if watch.fired:
        return {**reply, "result": None, "code": "timeout"}
    if gone:              # as the learner's process ended: its signal or exit code (1 for 0)
        return {**reply, "result": None, "code": code or 1}
    _account(result, learner, hello, last, name)
    return {**reply, "result": result, "code": 0}


def _account(result, learner, hello, last, name):
    """What the learner's process did besides computing, and where each verdict was made."""
    refused = list(dict.fromkeys(learner.refused))
    if learner.stopped and learner.stopped != "refused":
        refused.append(learner.stopped)
    result["refused"] = refused
    result["engine_changed"] = [str(n) for n in last.get("engine_changed") or []][:100]
    result["unguarded"] = [str(n) for n in hello.get("unguarded") or []]
    # all here, the checks and claims from the arrays and facts the learner's process returned
    from . import claims
    result["computed"] = {"checks": "judge", "claims": {text: learner.sites.get(text, "judge")
                                                        for text, _ in claims.of(name)}}
    result["requests"] = learner.requests


def preload():
    """Import every npformer module the judging may use (see the module's last paragraph), and
    take the teacher's number of draws from NPFORMER_GRADE_EXAMPLES."""
    import importlib
    import pkgutil

    import npformer
    for module in pkgutil.walk_packages(npformer.__path__, "npformer."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    if os.environ.get("NPFORMER_GRADE_EXAMPLES"):
        from . import judging
        judging.EXAMPLES = int(os.environ["NPFORMER_GRADE_EXAMPLES"])


def _failed_reply(job):
    """The reply to a job the judge itself could not judge: npformer's failure (its traceback),
    never reported as the learner's."""
    return {"result": None, "code": 1, "output": "", "dropped": 0, "token": job.get("token"),
            "judge_failed": "the judge raised\n" + traceback.format_exc()[-4000:]}


def serve(result_fd):
    """Judge every job read from stdin until it closes; each reply is one frame down ``result_fd``."""
    from .judges import send_reply
    nursery = Nursery()
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            reply = judge_job(job, nursery)
        except Exception:                     # noqa: BLE001 - said to the grader, the judge goes on
            reply = _failed_reply(job)
        send_reply(result_fd, reply)
    nursery.close()
    return 0


def _leave_as(code):
    """Exit as the learner's process did: the same signal, or its exit code."""
    if isinstance(code, int) and code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if isinstance(code, int) and code > 0 else 1)


def main(argv=None):
    """``--serve``: judge jobs until stdin closes. Else judge one exercise, send its result JSON
    down the pipe; exit code 0 unless the learner's process ended before the judging did (then
    its code)."""
    argv = sys.argv[1:] if argv is None else argv
    result_fd = int(argv[argv.index("--result-fd") + 1])
    os.set_inheritable(result_fd, False)
    private()                  # the learner's processes cannot reach into the judge
    preload()
    if "--serve" in argv:
        return serve(result_fd)
    token = sys.stdin.readline().strip()      # the grader's secret: a result without it is not ours
    job = {"workspace": argv[0], "exercise": argv[1], "together": "--together" in argv, "token": token,
           "timeout": float(argv[argv.index("--timeout") + 1]) if "--timeout" in argv else None,
           "scratch": os.getcwd()}
    reply = judge_job(job, Nursery())
    sys.stdout.write(reply["output"])
    sys.stdout.flush()
    if reply["result"] is None:
        _leave_as(reply["code"])
    with os.fdopen(result_fd, "w", encoding="utf-8") as channel:
        channel.write(json.dumps({**reply["result"], "token": token}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
