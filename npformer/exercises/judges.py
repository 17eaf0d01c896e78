"""The grader's side of its judges: long-lived judge processes, one exercise at a time each.

A ``Judge`` starts ``python -m npformer.exercises.runner --serve`` on first use and keeps it
for the whole grading session: a job goes to it as one JSON line, its reply comes back down a
pipe of its own as one frame (8 bytes of length, then JSON). ``Judges(n)`` holds ``n`` of them
for a class graded ``n`` submissions at a time. A judge that dies, or does not answer within
the job's wall time and a margin, is ended (its learner's process dies with it) and started
again; the reply then says how it ended, so that the grader's failure is never reported as the
learner's.
"""
from __future__ import annotations

import json
import os
import queue
import secrets
import select
import struct
import subprocess
import sys
import time
from contextlib import contextmanager

from .workspace import library_dir

JUDGE = "npformer.exercises.runner"     # the judge's module, run with ``--serve``
MARGIN = 30.0                    # seconds past a job's wall time before its judge is ended
REPLY_CAP = 64 << 20             # bytes of one reply
_LENGTH = struct.Struct("<Q")


def judge_env(root):
    """The environment of a judge (and of the learner's processes it starts): this npformer
    first on the path, the plain track, one OpenBLAS thread, temporary files under ``root``."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(library_dir()),
                                                         os.environ.get("PYTHONPATH", "")]),
            "NPFORMER_TRACK": "plain", "PYTHONIOENCODING": "utf-8", "PYTHONUNBUFFERED": "1",
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1"),
            "TMPDIR": root, "HOME": root}


def send_reply(fd, reply):
    """The judge's side: ``reply`` (a dict) as one frame down ``fd``."""
    data = json.dumps(reply).encode("utf-8")
    view = memoryview(_LENGTH.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


class Judge:
    """One judge process (started when first needed), judging the jobs it is given in turn."""

    def __init__(self, root):
        self.root = root
        self.process = self.replies = self.log = None
        self.busy = False

    def _start(self):
        from .sandbox import dies_with_parent
        read_end, write_end = os.pipe()
        self.log = open(os.path.join(self.root, f"judge-{secrets.token_hex(4)}.log"), "w+b")
        command = [sys.executable, "-m", JUDGE, "--serve", "--result-fd", str(write_end)]
        # no limits of the learner's kind (this is npformer's code): only that it dies with the
        # grader; in a session of its own, so that Ctrl-C at the terminal reaches the grader alone
        self.process = subprocess.Popen(command, cwd=self.root, env=judge_env(self.root), stdin=subprocess.PIPE,
                                        stdout=self.log, stderr=subprocess.STDOUT, pass_fds=(write_end,),
                                        start_new_session=True, preexec_fn=dies_with_parent())
        os.close(write_end)
        self.replies = read_end

    def judge(self, job, wall, on_wait=None):
        """The judge's reply to ``job`` (``runner.judge_job``'s), its token checked. When the
        judge itself fails (it dies, or its reply is not one), the job is tried once more with
        a new judge; a second failure is a reply with ``judge_failed`` (why, and what the judge
        printed). A job past its wall time and the margin: ``result`` None, code "timeout"."""
        reply = self._judge_once(job, wall, on_wait)
        if reply.get("judge_failed"):
            reply = self._judge_once(job, wall, on_wait)
        return reply

    def _judge_once(self, job, wall, on_wait):
        self.busy = True     # until a reply is read (an interrupt leaves it so: closing kills)
        reply = self._exchange(job, wall, on_wait)
        self.busy = False
        return reply

    def _exchange(self, job, wall, on_wait):
        if self.process is None:
            self._start()
        job = {**job, "token": secrets.token_hex(16)}
        try:
            self.process.stdin.write((json.dumps(job) + "\n").encode("utf-8"))
            self.process.stdin.flush()
        except OSError:
            return self._lost("the judge could not be started")
        began, data = time.monotonic(), b""
        while True:
            elapsed = time.monotonic() - began
            if elapsed > wall + MARGIN:
                self.close()
                return {"result": None, "code": "timeout", "output": "", "dropped": 0}
            ready, _, _ = select.select([self.replies], [], [], 0.25)
            if not ready:
                if on_wait is not None:
                    on_wait(elapsed)
                continue
            chunk = os.read(self.replies, 1 << 20)
            if not chunk:
                return self._lost("the judge ended")
            data += chunk
            if len(data) >= _LENGTH.size:
                size = _LENGTH.unpack(data[:_LENGTH.size])[0]
                if size > REPLY_CAP:
                    return self._lost("the judge's reply was too long")
                if len(data) >= _LENGTH.size + size:
                    reply = json.loads(data[_LENGTH.size:_LENGTH.size + size])
                    if reply.pop("token", None) != job["token"]:
                        return self._lost("a reply that is not the judge's")
                    return reply

    def _lost(self, why):
        """The reply when the judge itself failed: what it printed, and it is ended."""
        code = self.process.poll() if self.process else None
        tail = b""
        if self.log is not None:
            self.log.flush()
            self.log.seek(0)
            tail = self.log.read()[-4000:]
        self.close()
        return {"result": None, "code": code if code else 1, "dropped": 0, "output": "",
                "judge_failed": f"{why} (exit code {code})\n" + tail.decode("utf-8", errors="replace")}

    def close(self):
        """End the judge (it ends its learner's process with it): at once when it is judging
        (the grader was interrupted), else when it has read the end of its jobs."""
        if self.process is not None:
            if self.busy:
                self.process.kill()
            try:
                self.process.stdin.close()
            except OSError:
                pass
            try:
                self.process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            os.close(self.replies)
            self.log.close()
        self.process = self.replies = self.log = None


class Judges:
    """``n`` judges for submissions graded at once: ``with judges.one() as judge:``."""

    def __init__(self, n, root):
        self.all = [Judge(root) for _ in range(n)]
        self.free = queue.Queue()
        for judge in self.all:
            self.free.put(judge)

    @contextmanager
    def one(self):
        """A free judge for the duration of the block."""
        judge = self.free.get()
        try:
            yield judge
        finally:
            self.free.put(judge)

    def close(self):
        """End every judge."""
        for judge in self.all:
            judge.close()
