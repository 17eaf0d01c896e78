"""The parent side: start the worker processes and time them in alternating rounds.

Each worker (npformer fast, npformer plain, PyTorch) is its own process, started once per
OpenBLAS setting and kept alive, so it stays warm. For one measurement every worker
builds the workload and warms it up (>= the warm-up time, one process after the other);
then the rounds alternate A B C, B C A, C A B ...: only one process computes at a time,
and a slow spell of the shared machine falls on all of them alike. The value of a round
is the median of its calls; a measurement is the median over rounds.

The parent imports neither numpy nor torch: it has no BLAS threads of its own.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.machine import OtherLoad

ROOT = Path(__file__).resolve().parents[1]


class WorkerError(RuntimeError):
    """A worker failed: a one-line message; ``details`` holds its traceback or stderr."""

    def __init__(self, message, details=""):
        super().__init__(message)
        self.details = details


@dataclass(frozen=True)
class Plan:
    """How long to warm up and how many rounds to run (``--quick`` shrinks all of it)."""

    warmup: float = 1.5          # seconds of untimed calls per process and workload
    budget: float = 2.0          # timed seconds per process and measurement (sets the rounds)
    min_rounds: int = 7
    max_rounds: int = 11
    untimed_rounds: int = 1      # alternating rounds after the warm-ups, not recorded
    min_round: float = 0.1       # short calls are grouped so a round lasts at least this long
    settle: bool = True          # each worker waits for its BLAS threads to stop spinning

    def rounds_and_calls(self, call_seconds):
        """(rounds, calls per round) for a workload whose call takes ``call_seconds``."""
        call_seconds = max(call_seconds, 1e-6)
        calls = max(1, round(self.min_round / call_seconds))
        rounds = int(self.budget / (calls * call_seconds))
        return min(self.max_rounds, max(self.min_rounds, rounds)), calls


QUICK_PLAN = Plan(warmup=0.0, budget=0.0, min_rounds=2, max_rounds=2, untimed_rounds=0, min_round=0.0,
                  settle=False)


class WorkerProcess:
    """One ``python -m benchmarks.worker`` process and its JSON-lines pipe."""

    def __init__(self, name, library, track, threads, env, options=()):
        self.name, self.library, self.track = name, library, track
        if library == "npformer":
            env = {**env, "NPFORMER_TRACK": track}
        self.stderr = tempfile.TemporaryFile(mode="w+")
        command = [sys.executable, "-m", "benchmarks.worker", "--library", library,
                   "--track", track, "--threads", str(threads), *options]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.stderr, text=True, cwd=ROOT, env=env)

    def ask(self, op, **fields):
        """Send one command and return the worker's answer (a dict)."""
        try:
            self.process.stdin.write(json.dumps({"op": op, **fields}) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            raise WorkerError(f"worker {self.name} stopped during {op!r}", self.stderr_tail())
        reply = json.loads(line)
        if "error" in reply:
            raise WorkerError(f"worker {self.name} failed during {op!r}: {reply['error']}",
                              reply.get("traceback", ""))
        return reply

    def stderr_tail(self, chars=3000):
        self.stderr.seek(0)
        return self.stderr.read()[-chars:]

    def close(self):
        """Close the worker's input (it then exits); end it by its own process id if it does not."""
        try:
            self.process.stdin.close()
            self.process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            self.process.stdout.close()
            self.stderr.close()


def rotated(items, shift):
    """items rotated left by ``shift``: A B C -> B C A -> C A B."""
    shift %= len(items)
    return items[shift:] + items[:shift]


def measure(workers, key, spec, plan, calls=None):
    """Time one workload in every worker, rounds alternating; medians in seconds per call.

    After the warm-ups one more alternating round runs untimed: a worker that sat idle
    while the others warmed up runs its first call after the pause slower.
    """
    setups = {w.name: w.ask("setup", key=key, spec=spec, warmup=plan.warmup,
                            settle=plan.settle) for w in workers}
    per_call = statistics.median(s["call_seconds"] for s in setups.values())
    rounds, grouped = plan.rounds_and_calls(per_call)
    calls = calls or grouped
    times = {w.name: [] for w in workers}
    other = None
    for index in range(-plan.untimed_rounds, rounds):
        if index == 0:
            other = OtherLoad(w.process.pid for w in workers)
        for worker in rotated(list(workers), index):
            reply = worker.ask("round", key=key, calls=calls, settle=plan.settle)
            if index >= 0:
                times[worker.name].append(statistics.median(reply["times"]))
    for worker in workers:
        worker.ask("drop", key=key)
    return {"rounds": rounds, "calls": calls, "times": times, "other_load": other.share(),
            "median": {name: statistics.median(t) for name, t in times.items()},
            "setup": setups}


def run_concurrently(commands, env, parallel):
    """Run one-shot worker commands, ``parallel`` at a time; their JSON output, in order."""
    results, running = [None] * len(commands), []
    pending = list(enumerate(commands))
    while pending or running:
        while pending and len(running) < parallel:
            index, command = pending.pop(0)
            process = subprocess.Popen([sys.executable, "-m", "benchmarks.worker", *command],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, cwd=ROOT, env=env)
            running.append((index, command, process))
        index, command, process = running.pop(0)
        out, err = process.communicate()
        if process.returncode:
            raise WorkerError(f"worker {' '.join(command)} exited {process.returncode}", err[-3000:])
        results[index] = json.loads(out.strip().splitlines()[-1])
    return results
