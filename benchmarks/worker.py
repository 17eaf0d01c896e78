"""One benchmark worker: a process running one library (npformer on one track, or PyTorch).

Two ways to run it:

    python -m benchmarks.worker --library npformer --track fast --threads 2
        serves the parent: reads one JSON command per line on stdin and answers one JSON
        line on stdout (the process stays alive, so it stays warm between rounds);
    python -m benchmarks.worker --memory small --library torch --threads 2
        a fresh process that runs two training steps and prints its peak RSS as JSON.

Commands: ``info``; ``setup`` (build a workload, warm it up for at least ``warmup``
seconds); ``round`` (time ``calls`` calls of a workload); ``drop``; ``matmul`` (GEMM
peak); ``attention`` (npformer only: attention alone); ``quit``.

After a warm-up and after every round the worker waits until its own CPU time stops
growing before it answers: OpenBLAS keeps a worker thread spinning for about 0.1 s after
each call, and it would otherwise run on the core the next process is timed on.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback

from benchmarks.machine import rss, threadpools

_LIMITS = contextlib.ExitStack()   # the thread limits in force (kept for the whole process)
_FAST_SETUP = {}        # what the fast track's worker switched on


def settle(wanted=True, quiet_for=0.01, limit=0.3):
    """Sleep until this process's CPU time (all threads) stops growing; returns seconds waited."""
    start = time.perf_counter()
    if not wanted:
        return 0.0
    while time.perf_counter() - start < limit:
        used = time.process_time()
        time.sleep(quiet_for)
        if time.process_time() - used < 0.1 * quiet_for:
            break
    return time.perf_counter() - start


def gemm_peak(make_pair, sizes, repeats):
    """Best over ``sizes`` of the median GFLOP/s of ``a @ b`` for square float32 inputs."""
    best = 0.0
    for n in sizes:
        a, b = make_pair(n)
        for _ in range(2):
            a @ b
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - start)
        best = max(best, 2 * n ** 3 / sorted(times)[len(times) // 2] / 1e9)
    return best


def start_library(library, track, threads, blas_one_thread=False, beside_blas=False):
    """Import the library, fix its thread counts and (npformer) its track.

    The fast track's workers are programs that train: they keep freed memory for reuse (a
    setting of the whole process, made here at their entry point). The fast track then
    decides its own threads (``npformer.fast.parallel``); ``blas_one_thread`` runs it as
    ``npformer train --threads N`` does: BLAS one thread per call, the fast kernels' row
    blocks on ``threads`` cores (``runtime.cores.limit_blas_threads``, the old
    ``use_cores(N)``); ``beside_blas`` cuts the fast kernels' work into blocks on ``threads``
    cores while BLAS keeps its own threads (``use_cores(threads, beside_blas=True)``)."""
    from threadpoolctl import threadpool_limits
    if library == "torch":
        import torch
        torch.set_num_threads(threads)
    else:
        import npformer
        npformer.use_track(track)
    _LIMITS.enter_context(threadpool_limits(threads))
    if library != "torch" and track == "fast":
        from npformer.runtime.memory import keep_freed_memory
        _FAST_SETUP["keep_freed_memory"] = keep_freed_memory()
        if blas_one_thread:
            from npformer.runtime.cores import limit_blas_threads
            _LIMITS.enter_context(limit_blas_threads(threads))
            _FAST_SETUP["blas_one_thread"] = True
        elif beside_blas:
            import npformer.fast
            npformer.fast.use_cores(threads, beside_blas=True)
            _FAST_SETUP["beside_blas"] = True
        else:
            import npformer.fast
            if threads < npformer.fast.available_cores():     # the run's thread count holds for
                npformer.fast.use_cores(threads)               # the fast kernels' own blocks too


def library_info(library):
    """Versions, thread pools and switches actually in effect in this process."""
    import platform
    import numpy
    info = {"library": library, "pid": os.getpid(), "python": platform.python_version(),
            "numpy": numpy.__version__, "threadpools": threadpools(),
            "cpus_allowed": len(os.sched_getaffinity(0))}
    if library == "torch":
        import torch
        parallel = torch.__config__.parallel_info().splitlines()
        info.update(torch=torch.__version__, torch_threads=torch.get_num_threads(),
                    torch_interop_threads=torch.get_num_interop_threads(),
                    torch_parallel=[line.strip() for line in parallel
                                    if "()" in line or "backend" in line],
                    torch_cpu_capability=torch.backends.cpu.get_cpu_capability())
    else:
        import importlib
        import npformer
        tracks = importlib.import_module("npformer.core.track")
        twins = getattr(tracks, "twins", dict)
        info.update(npformer=npformer.__version__, npformer_path=os.path.dirname(npformer.__file__),
                    track=npformer.current_track(), fast_twins=len(twins()))
        if npformer.current_track() == "fast":
            fast = importlib.import_module("npformer.fast")
            info.update(cores=fast.cores(), **_FAST_SETUP)
    return info


def make_workload(library, spec):
    """(call, before_round, facts) from the library's own module."""
    if library == "torch":
        from benchmarks.torch_reference import make_workload as make
    else:
        from benchmarks.workloads import make_workload as make
    return make(spec)


def warm_up(call, before_round, seconds):
    """Call until ``seconds`` have passed and at least two calls ran; median of the later calls."""
    if before_round:
        before_round()
    times, start = [], time.perf_counter()
    while len(times) < 2 or time.perf_counter() - start < seconds:
        begin = time.perf_counter()
        call()
        times.append(time.perf_counter() - begin)
    later = sorted(times[len(times) // 2:])
    return {"warmup_seconds": time.perf_counter() - start, "warmup_calls": len(times),
            "call_seconds": later[len(later) // 2]}


def timed_round(call, before_round, calls):
    """Seconds of each of ``calls`` calls (``before_round`` first, untimed)."""
    if before_round:
        before_round()
    times = []
    for _ in range(calls):
        begin = time.perf_counter()
        call()
        times.append(time.perf_counter() - begin)
    return times


class Server:
    """The command loop's state: this worker's library and its live workloads."""

    def __init__(self, library, threads):
        self.library, self.threads = library, threads
        self.workloads = {}

    def handle(self, command):
        op = command["op"]
        if op == "info":
            return library_info(self.library)
        if op == "setup":
            call, before, facts = make_workload(self.library, command["spec"])
            self.workloads[command["key"]] = (call, before, facts)
            reply = warm_up(call, before, command["warmup"])
            return {**reply, **facts(), "settled": settle(command["settle"])}
        if op == "round":
            call, before, _ = self.workloads[command["key"]]
            times = timed_round(call, before, command["calls"])
            return {"times": times, "settled": settle(command["settle"])}
        if op == "drop":
            self.workloads.pop(command["key"], None)
            return {"dropped": command["key"]}
        if op == "matmul":
            gflops = self.matmul(command["sizes"], command["repeats"])
            return {"gflops": gflops, "settled": settle(command.get("settle", True))}
        if op == "attention":
            from benchmarks.workloads import attention_alone
            rows = attention_alone(command["lengths"])
            return {"rows": rows, "settled": settle(command.get("settle", True))}
        if op == "quit":
            return {"bye": True}
        raise ValueError(f"op: unknown command {op!r}")

    def matmul(self, sizes, repeats):
        if self.library == "torch":
            from benchmarks.torch_reference import random_square_pair
            return gemm_peak(random_square_pair, sizes, repeats)
        from threadpoolctl import threadpool_limits
        from benchmarks.workloads import random_square_pair
        # the machine's numpy peak: BLAS on every thread, even in the fast worker (whose
        # BLAS otherwise runs one thread per call, its own row blocks using the cores)
        with threadpool_limits(self.threads, user_api="blas"):
            return gemm_peak(random_square_pair, sizes, repeats)


def serve(library, track, threads, blas_one_thread=False, beside_blas=False):
    """Answer the parent's commands until ``quit`` or end of input."""
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)           # anything a library prints goes to stderr, not into the protocol
    sys.stdout = sys.stderr
    start_library(library, track, threads, blas_one_thread, beside_blas)
    server = Server(library, threads)
    for line in sys.stdin:
        command = json.loads(line)
        try:
            reply = server.handle(command)
        except Exception as error:  # reported to the parent, which stops the run
            reply = {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
        protocol.write(json.dumps(reply) + "\n")
        protocol.flush()
        if command["op"] == "quit":
            break
    return 0


def peak_memory(library, track, threads, config, steps):
    """Peak RSS of a fresh process running ``steps`` training steps of ``config``."""
    from benchmarks.specs import CONFIGS
    start_library(library, track, threads)
    base = rss("VmRSS")
    call, _, facts = make_workload(library, {"kind": "train", "cfg": CONFIGS[config]})
    for _ in range(steps):
        call()
    return {"library": library, "track": track, "config": config, "steps": steps,
            "base": base, "peak": rss("VmHWM"), **facts()}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.worker", description=__doc__.split("\n")[0])
    parser.add_argument("--library", choices=["npformer", "torch"], required=True)
    parser.add_argument("--track", choices=["fast", "plain"], default="fast")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--blas-one-thread", action="store_true",
                        help="fast track: BLAS one thread per call, the fast kernels on --threads cores")
    parser.add_argument("--beside-blas", action="store_true",
                        help="fast track: its blocks on --threads cores beside BLAS's own threads")
    parser.add_argument("--memory", metavar="CONFIG", help="measure peak RSS of this config and exit")
    parser.add_argument("--steps", type=int, default=2, help="training steps of the --memory run")
    args = parser.parse_args(argv)
    if args.memory:
        print(json.dumps(peak_memory(args.library, args.track, args.threads, args.memory, args.steps)))
        return 0
    return serve(args.library, args.track, args.threads, args.blas_one_thread, args.beside_blas)


if __name__ == "__main__":
    sys.exit(main())
