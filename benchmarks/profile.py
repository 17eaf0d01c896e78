"""Where the training step's time goes, op by op: npformer's and PyTorch's, each in its own process.

    python -m benchmarks.profile                      # tiny, fast track, 1 thread
    python -m benchmarks.profile --config small --steps 40 --threads 2 --track plain

The step is the targets' one (zero the gradients, forward, mean cross-entropy, backward; no
optimizer), on a benchmark config. npformer's side times every function that has a fast
twin (on the fast track the twin, on the plain track the plain function itself) and every
module's forward and backward, and reports each one's own time (its callees' subtracted):
"Linear.backward" is then the module's part (checks, ``grad +=``), "linear_backward" the
matrix products. PyTorch's side is ``torch.profiler``'s self CPU time per operator. An
npformer figure is the median over the steps of that op's time in one step, a PyTorch figure
the op's total over the steps divided by their number (the profiler keeps no per-step
times), in microseconds; profiling costs time of its own, so the whole step is also timed
without it.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks.harness import ROOT
from benchmarks.tables import md_table


def _npformer_ops(config, steps, track, threads):
    """{op: [median us per step, calls per step]}, and the plain step's median ms."""
    import collections
    import functools
    from benchmarks.specs import CONFIGS
    from benchmarks.worker import start_library, make_workload
    start_library("npformer", "fast", threads)         # the wrappers below run on the fast track
    from npformer.core import track as tracks
    from npformer.core.module import Module
    call, _, _ = make_workload("npformer", {"kind": "train_no_opt", "cfg": CONFIGS[config]})
    step_ms = _median_ms(call, steps)
    clock, stack = time.perf_counter, [0.0]
    own, calls = collections.Counter(), collections.Counter()

    def timed(name, function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            stack.append(0.0)
            start = clock()
            try:
                return function(*args, **kwargs)
            finally:
                spent = clock() - start
                own[name] += spent - stack.pop()
                calls[name] += 1
                stack[-1] += spent
        return wrapper

    for key, (plain, fast) in tracks.twins().items():
        # a method's twin (Embedding.backward) is the module's own body: named apart from the
        # module's wrapper, which keeps the checks around it
        name = plain.__qualname__ if "." not in plain.__qualname__ else f"{plain.__qualname__} ({track} track)"
        tracks._FAST[key] = timed(name, fast if track == "fast" else plain)
    pending = [Module]
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        for method in ("forward", "backward"):
            if method in vars(cls):
                setattr(cls, method, timed(f"{cls.__name__}.{method}", vars(cls)[method]))
    per_step = collections.defaultdict(list)
    for index in range(steps + 5):
        before, stack[0] = dict(own), 0.0
        start = clock()
        call()
        outside = clock() - start - stack[0]
        if index >= 5:                                  # the first steps after wrapping: untimed
            for name, total in own.items():
                per_step[name].append(total - before.get(name, 0.0))
            per_step["(the step outside these: zero_grad, the benchmark's glue)"].append(outside)
    ops = {name: [1e6 * statistics.median(times), calls[name] / (steps + 5)]
           for name, times in per_step.items()}
    return ops, step_ms


def _torch_ops(config, steps, threads):
    """{op: [median us per step, calls per step]}, and the unprofiled step's median ms."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from benchmarks.specs import CONFIGS
    from benchmarks.torch_reference import TorchRunner
    torch.set_num_threads(threads)
    runner = TorchRunner(CONFIGS[config])
    step_ms = _median_ms(runner.train_no_opt, steps)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            runner.train_no_opt()
    ops = {e.key: [e.self_cpu_time_total / steps, e.count / steps] for e in prof.key_averages()}
    return ops, step_ms


def _median_ms(call, steps):
    for _ in range(max(5, steps // 10)):
        call()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def worker(args):
    """One library's profile as a JSON line on stdout."""
    if args.library == "torch":
        ops, step_ms = _torch_ops(args.config, args.steps, args.threads)
    else:
        ops, step_ms = _npformer_ops(args.config, args.steps, args.track, args.threads)
    print(json.dumps({"ops": ops, "step_ms": step_ms}))
    return 0


def table(ops, rows):
    """The ``rows`` largest ops as Markdown, with the share of the sum."""
    total = sum(us for us, _ in ops.values()) or 1.0
    ranked = sorted(ops.items(), key=lambda item: -item[1][0])
    body = [[name, f"{us:.0f}", f"{count:g}", f"{100 * us / total:.0f}%"] for name, (us, count) in ranked[:rows]]
    rest = sum(us for _, (us, _) in ranked[rows:])
    if rest:
        body.append([f"({len(ranked) - rows} more)", f"{rest:.0f}", "", f"{100 * rest / total:.0f}%"])
    return md_table(["op", "us per step", "calls per step", "share"], body), total


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile", description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="tiny", help="a benchmark config (default tiny)")
    parser.add_argument("--steps", type=int, default=300, help="profiled steps (default 300)")
    parser.add_argument("--threads", type=int, default=1, help="threads per library (default 1)")
    parser.add_argument("--track", choices=("fast", "plain"), default="fast")
    parser.add_argument("--rows", type=int, default=25, help="ops shown per library (default 25)")
    parser.add_argument("--library", choices=("npformer", "torch"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.library:
        return worker(args)
    libraries = ["npformer"]
    try:
        import importlib.util
        if importlib.util.find_spec("torch") is not None:
            libraries.append("torch")
    except ImportError:                                   # pragma: no cover
        pass
    from benchmarks.machine import cpu_model, describe_openblas
    print(f"# Where the time goes: the {args.config} training step, op by op\n")
    print(f"{cpu_model()}; {args.threads} thread(s) per library; OpenBLAS: "
          f"{describe_openblas(os.environ)}; npformer on the {args.track} track; medians over "
          f"{args.steps} steps.\n")
    for library in libraries:
        command = [sys.executable, "-m", "benchmarks.profile", "--library", library, "--config", args.config,
                   "--steps", str(args.steps), "--threads", str(args.threads), "--track", args.track]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if done.returncode:
            print(f"{library}: failed\n\n```\n{done.stderr[-2000:]}\n```\n")
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        text, total = table(result["ops"], args.rows)
        print(f"## {'npformer, ' + args.track + ' track' if library == 'npformer' else 'PyTorch'}: "
              f"{result['step_ms']:.2f} ms a step unprofiled, {total / 1e3:.2f} ms profiled\n")
        print(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
