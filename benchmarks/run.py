"""npformer against PyTorch CPU eager, each in its own process: ``python -m benchmarks``.

    python -m benchmarks              # everything (< 10 minutes on 2 cores): results/latest.md
    python -m benchmarks --quick      # the tiny shapes, seconds (what the test runs): results/quick/
    python -m benchmarks --configs small medium --no-growth

Three worker processes run side by side, each kept alive and told through a pipe to run
one round at a time: npformer on the fast track, npformer on the plain track, and the
PyTorch reference (``torch_reference.py``). The rounds alternate between them. Each
OpenBLAS setting of the run (the environment's variables as they are, and both
unset) gets its own set of workers. The report (Markdown and JSON) goes to ``--output``:
by default ``results/`` (committed), or ``results/quick/`` with ``--quick`` (git ignores it:
a smoke run is not a measurement to keep).
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import specs
from benchmarks.harness import QUICK_PLAN, ROOT, Plan, WorkerError
from benchmarks.machine import cpu_model, git_commit, load_average, openblas_settings
from benchmarks.suite import DEFAULT_WORKERS, LIBRARIES, Log, run_setting

HERE = Path(__file__).resolve().parent


@dataclass
class Options:
    """What one run measures and how."""

    configs: list
    threads: int
    quick: bool
    with_torch: bool
    workers: tuple
    workloads: tuple
    growth: bool
    plan: Plan


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny shapes, seconds (used by the test)")
    parser.add_argument("--configs", nargs="+", choices=list(specs.CONFIGS),
                        help="configs to time (default: all; --quick: tiny)")
    parser.add_argument("--threads", type=int,
                        help="threads per library (default: the number of CPUs; --quick: 1)")
    parser.add_argument("--output", type=Path, default=None,
                        help="directory for the report (default results/; --quick: results/quick/)")
    parser.add_argument("--no-torch", action="store_true", help="npformer only (no PyTorch worker)")
    parser.add_argument("--workers", nargs="+", choices=[n for n, *_ in LIBRARIES], default=DEFAULT_WORKERS,
                        help="the workers to run (default: fast pinned plain torch; 'beside': the "
                             "fast kernels' blocks beside BLAS's own threads)")
    parser.add_argument("--no-growth", action="store_true", help="skip the sweeps, decoding and attention")
    parser.add_argument("--warmup", type=float, help="warm-up seconds per process and workload (1.5)")
    parser.add_argument("--workloads", nargs="+", choices=list(specs.WORKLOADS), default=list(specs.WORKLOADS),
                        help="the workloads timed on each config (default: all three)")
    parser.add_argument("--name", default=None,
                        help="the report's file names in --output (default latest; --quick: quick)")
    return parser.parse_args(argv)


def options_from(args):
    if args.threads is None:
        args.threads = 1 if args.quick else os.cpu_count() or 1
    if args.threads < 1:
        raise ValueError(f"--threads: expected a positive count, got {args.threads}")
    if "fast" not in args.workers:
        raise ValueError(f"--workers: expected 'fast' among them (the tables compare with it), "
                         f"got {' '.join(args.workers)}")
    plan = QUICK_PLAN if args.quick else Plan()
    if args.warmup is not None:
        plan = Plan(**{**plan.__dict__, "warmup": args.warmup})
    with_torch = not args.no_torch and importlib.util.find_spec("torch") is not None
    return Options(configs=args.configs or (["tiny"] if args.quick else list(specs.CONFIGS)),
                   threads=args.threads, quick=args.quick, with_torch=with_torch,
                   workers=tuple(args.workers), workloads=tuple(args.workloads),
                   growth=not args.no_growth, plan=plan)


def run(options, log, output, stem):
    """Measure every setting; returns the results dict (JSON-ready)."""
    start = time.perf_counter()
    run_facts = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                 "commit": git_commit(ROOT), "command": " ".join(["python -m benchmarks", *sys.argv[1:]]),
                 "cpu": cpu_model(), "cores": os.cpu_count(), "threads": options.threads,
                 "warmup": options.plan.warmup, "load_start": load_average()}
    settings = openblas_settings(dict(os.environ))
    if len(settings) == 1:
        run_facts["openblas_note"] = ("The environment sets neither OPENBLAS_CORETYPE nor "
                                      "OPENBLAS_L2_SIZE: its setting is \"unset\", measured once.")
    results = {"run": run_facts, "settings": []}
    for index, (label, env) in enumerate(settings):
        results["settings"].append(run_setting(label, env, options, log, first=index == 0))
    run_facts.update(seconds=time.perf_counter() - start, load_end=load_average(),
                     load_max=max(log.loads + [run_facts["load_start"]]))
    if options.growth:
        from benchmarks.plot import save_plot
        results["plot"] = save_plot(results["settings"][0]["growth"], output / f"{stem}-growth.png")
    return results


def write(results, output, stem):
    """The Markdown report and the JSON of every timing, both written atomically."""
    from benchmarks.report import render
    from npformer.core.fileio import atomic_write, write_json
    text = render(results)
    atomic_write(output / f"{stem}.md", lambda f: f.write(text), mode="w")
    write_json(output / f"{stem}.json", results)
    return text


def default_output(quick):
    """Where the report goes without --output: results/, or results/quick/ (ignored by git)."""
    return HERE / "results" / "quick" if quick else HERE / "results"


def main(argv=None):
    """Run the benchmark; exit status 0, 1 (a worker failed) or 2 (usage)."""
    args = parse(argv)
    try:
        options = options_from(args)
    except ValueError as error:
        print(f"python -m benchmarks: {error}", file=sys.stderr)
        return 2
    stem = args.name or ("quick" if args.quick else "latest")
    if args.output is None:
        args.output = default_output(args.quick)
    args.output.mkdir(parents=True, exist_ok=True)
    log = Log(sys.stderr)
    try:
        results = run(options, log, args.output, stem)
    except WorkerError as error:
        log_path = args.output / f"{stem}-error.log"
        log_path.write_text(f"{error}\n\n{error.details}\n")
        first_line = str(error).splitlines()[0]
        print(f"python -m benchmarks: {first_line} (details in {log_path})", file=sys.stderr)
        return 1
    text = write(results, args.output, stem)
    print(text)
    print(f"wrote {args.output / (stem + '.md')} and {stem}.json in {results['run']['seconds']:.0f} s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
