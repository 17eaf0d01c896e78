"""The measurements of one run, in order, for each OpenBLAS setting.

The first setting ("unset") is measured in full: the workers (npformer fast as it chooses
its threads by itself, npformer fast with BLAS one thread per call and its own row blocks on
every core as ``npformer train --threads N`` runs it, npformer plain, PyTorch) start together, report their thread pools, measure the GEMM
peak, time every config's workloads in alternating rounds, measure the peak again, then
how cost grows (sequence length and width sweeps), KV-cached decoding and attention
alone (without the BLAS-one-thread worker); last, the peak RSS of a fresh process per
(library, track, config), two at a time (likewise).
A second setting (the environment's OpenBLAS variables, when it sets any) measures the
training step with and without the optimizer and the forward (every worker) and the peak RSS.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from benchmarks import specs
from benchmarks.harness import WorkerProcess, measure, run_concurrently
from benchmarks.machine import describe_openblas, load_average

# (name, library, track, worker options)
LIBRARIES = (("fast", "npformer", "fast", ()), ("pinned", "npformer", "fast", ("--blas-one-thread",)),
             ("beside", "npformer", "fast", ("--beside-blas",)),
             ("plain", "npformer", "plain", ()), ("torch", "torch", "fast", ()))
DEFAULT_WORKERS = ("fast", "pinned", "plain", "torch")
TIMED_ONLY = ("pinned", "beside")   # timed on the configs; not in the sweeps nor the memory runs
TARGET_WORKLOADS = ("train_no_opt", "train", "forward")


@dataclass(frozen=True)
class Scope:
    """What one setting measures: the workers, the workloads, and whether cost growth too."""

    names: tuple
    workloads: tuple
    growth: bool


def scope_for(first, options):
    """Everything in the first setting; in a second one only what the targets need."""
    names = tuple(n for n, library, _, _ in LIBRARIES
                  if n in options.workers and (options.with_torch or library != "torch"))
    if first:
        return Scope(names, options.workloads, options.growth and "fast" in names)
    return Scope(names, tuple(w for w in TARGET_WORKLOADS if w in options.workloads), False)


class Log:
    """Progress lines on stderr with the elapsed time and the load average."""

    def __init__(self, stream):
        self.stream, self.start = stream, time.perf_counter()
        self.loads = []

    def __call__(self, message):
        load = load_average()
        self.loads.append(load)
        print(f"[{time.perf_counter() - self.start:5.0f} s, load {load:.2f}] {message}",
              file=self.stream, flush=True)


def start_workers(env, threads, names):
    """The worker processes of one setting, started together (their imports overlap)."""
    return [WorkerProcess(name, library, track, threads, env, worker_options)
            for name, library, track, worker_options in LIBRARIES if name in names]


PEAK_SIZES, QUICK_PEAK_SIZES, PEAK_REPEATS = (1024, 1536, 2048), (128,), 5


def gemm_peaks(workers, options):
    """GFLOP/s of a square float32 GEMM in each worker (the numpy one is the reference peak)."""
    sizes, repeats = (QUICK_PEAK_SIZES if options.quick else PEAK_SIZES), PEAK_REPEATS
    return {w.name: w.ask("matmul", sizes=list(sizes), repeats=repeats,
                          settle=options.plan.settle)["gflops"] for w in workers}


def time_configs(workers, workloads, options, log):
    """Every config's workloads (training step, without optimizer, forward alone)."""
    results = {}
    for name in options.configs:
        results[name] = {}
        for kind in workloads:
            spec = {"kind": kind, "cfg": specs.CONFIGS[name]}
            results[name][kind] = measure(workers, f"{name}/{kind}", spec, options.plan)
            medians = results[name][kind]["median"]
            log(f"{name} {kind}: " + ", ".join(f"{k} {1e3 * v:.1f} ms" for k, v in medians.items())
                + f" (other load {100 * results[name][kind]['other_load']:.0f}%)")
    return results


def time_sweep(workers, sizes, make_config, label, options, log):
    """Training-step time (with AdamW) at each size of a sweep."""
    rows = []
    for size in sizes:
        spec = {"kind": "train", "cfg": make_config(size, options.quick)}
        result = measure(workers, f"{label}/{size}", spec, options.plan)
        rows.append({"size": size, "median": result["median"], "rounds": result["rounds"],
                     "calls": result["calls"], "cfg": spec["cfg"], "other_load": result["other_load"],
                     "times": result["times"]})
        log(f"{label} {size}: " + ", ".join(f"{k} {1e3 * v:.1f} ms" for k, v in result["median"].items()))
    return rows


def time_decoding(workers, options, log):
    """Per-token time of KV-cached decoding against the context length (npformer only)."""
    contexts = specs.QUICK_DECODE_CONTEXTS if options.quick else specs.DECODE_CONTEXTS
    cfg = specs.CONFIGS[specs.QUICK_DECODE_CONFIG if options.quick else specs.DECODE_CONFIG]
    npformer = [w for w in workers if w.library == "npformer"]
    rows = []
    for context in contexts:
        spec = {"kind": "decode", "cfg": cfg, "context": context}
        result = measure(npformer, f"decode/{context}", spec, options.plan, calls=16)
        rows.append({"context": context, "median": result["median"], "rounds": result["rounds"],
                     "cfg": cfg, "other_load": result["other_load"], "times": result["times"]})
        log(f"decode {context}: " + ", ".join(f"{k} {1e3 * v:.2f} ms" for k, v in result["median"].items()))
    return rows


def growth(workers, options, log):
    """How cost grows: the two sweeps, decoding, and attention alone (fast track)."""
    quick = options.quick
    out = {"seq_sweep": time_sweep(workers, specs.QUICK_SEQ_SWEEP if quick else specs.SEQ_SWEEP,
                                   specs.seq_sweep_config, "seq", options, log),
           "width_sweep": time_sweep(workers, specs.QUICK_WIDTH_SWEEP if quick else specs.WIDTH_SWEEP,
                                     specs.width_sweep_config, "width", options, log),
           "decode": time_decoding(workers, options, log)}
    fast = next(w for w in workers if w.name == "fast")
    lengths = (32, 64) if quick else (256, 1024, 4096)
    out["attention"] = fast.ask("attention", lengths=list(lengths), settle=options.plan.settle)["rows"]
    log("attention alone done")
    return out


def peak_memory(env, names, options):
    """{config: {worker name: peak RSS record}}, a fresh process each, two at a time."""
    jobs = [(config, name, ["--memory", config, "--library", library, "--track", track,
                            "--threads", str(options.threads)])
            for config in options.configs for name, library, track, _ in LIBRARIES
            if name in names and name not in TIMED_ONLY]
    records = run_concurrently([job[2] for job in jobs], env, parallel=3 if options.quick else 2)
    out = {}
    for (config, name, _), record in zip(jobs, records):
        out.setdefault(config, {})[name] = record
    return out


def run_setting(label, env, options, log, first):
    """Everything measured under one OpenBLAS setting."""
    scope = scope_for(first, options)
    result = {"label": label, "openblas": describe_openblas(env), "load_start": load_average()}
    workers = start_workers(env, options.threads, scope.names)
    try:
        result["workers"] = {w.name: w.ask("info") for w in workers}
        log(f"{label}: workers ready ({describe_openblas(env)})")
        result["peak_sizes"] = list(QUICK_PEAK_SIZES if options.quick else PEAK_SIZES)
        result["peak_start"] = gemm_peaks(workers, options)
        result["configs"] = time_configs(workers, scope.workloads, options, log)
        result["peak_end"] = gemm_peaks(workers, options)
        if scope.growth:
            result["growth"] = growth([w for w in workers if w.name not in TIMED_ONLY], options, log)
    finally:
        for worker in workers:
            worker.close()
    result["memory"] = peak_memory(env, scope.names, options)
    log(f"{label}: peak memory done")
    result["load_end"] = load_average()
    return result
