"""The Markdown report of one run: environment, tables per setting, targets, how cost grows."""
from __future__ import annotations

import statistics

from benchmarks import specs
from benchmarks.growth_report import growth_section
from benchmarks.tables import MIB, NAMES, SHORT, VARIANTS, md_table, ms, reference_peak
from benchmarks.targets import TRAIN_STEP, best_fast, targets_section

def step_rows(setting):
    """The training step of the targets, one row per config (what the issue's table shows)."""
    peak = reference_peak(setting)
    rows = []
    for config, measured in setting["configs"].items():
        result = measured.get(TRAIN_STEP)
        if not result:
            continue
        med = result["median"]
        flops = 3 * specs.forward_flops(specs.CONFIGS[config])
        _, best = best_fast(med)
        torch = med.get("torch")
        row = [config] + [ms(med[n]) if n in med else "-" for n in ("plain", "fast", "pinned", "torch")]
        row += [f"{best / torch:.2f}x" if torch else "-",
                f"{med['plain'] / torch:.2f}x" if torch and "plain" in med else "-",
                f"{100 * flops / best / 1e9 / peak:.0f}%",
                f"{flops / peak / 1e9 / torch:.2f}x" if torch else "-"]
        rows.append(row)
    return rows


def step_section(results):
    """The training step without the optimizer, per OpenBLAS setting: plain, fast (both ways
    of using the cores) and PyTorch, the ratios and the share of numpy's GEMM peak."""
    run = results["run"]
    threads = run["threads"]
    cores = f"{threads} core{'s' * (threads != 1)}"
    out = ["## The training step: forward, mean cross-entropy, backward (no optimizer)", "",
           f"{run['cpu']}, {run['cores']} cores, {threads} thread{'s' * (threads != 1)} per library. "
           f"\"fast\": the fast "
           f"track by itself (BLAS runs its own threads, the rest runs on the calling thread); "
           f"\"fast, {threads} threads\": BLAS one thread per call and the fast kernels' row blocks "
           f"on {cores} (`npformer train --threads {threads}`); \"best fast\": the quicker "
           "of the two. \"share of GEMM peak\": the step's matmul GFLOP/s (a step counts 3 "
           "forwards) at the best fast time, over numpy's square float32 GEMM peak; \"at the GEMM "
           "peak\": the time of those matmuls alone at that peak, over PyTorch's: the lowest "
           "ratio npformer could reach with this BLAS.", ""]
    headers = ["config", "plain ms", "fast ms", f"fast, {threads} threads ms", "PyTorch ms",
               "best fast / PyTorch", "plain / PyTorch", "share of GEMM peak", "at the GEMM peak / PyTorch"]
    for setting in results["settings"]:
        rows = step_rows(setting)
        if not rows:
            continue
        out += [f"### OpenBLAS {setting['label']} ({setting['openblas']}): numpy's GEMM peak "
                f"{reference_peak(setting):.0f} GFLOP/s", "", md_table(headers, rows), ""]
    return out


def worker_rows(setting):
    rows = []
    for name, info in setting["workers"].items():
        pools = "; ".join(f"{p.get('internal_api')} {p.get('version', '')} ({p['file']}): "
                          f"{p.get('num_threads')} threads"
                          + (f", kernel {p['architecture']}" if p.get("architecture") else "")
                          for p in info["threadpools"])
        if info["library"] == "torch":
            extra = (f"torch {info['torch']}, get_num_threads {info['torch_threads']}, interop "
                     f"{info['torch_interop_threads']}, {info['torch_cpu_capability']}; "
                     + "; ".join(info["torch_parallel"]))
        else:
            extra = (f"npformer {info['npformer']} from {info['npformer_path']}, track "
                     f"{info['track']}, fast twins registered: {info['fast_twins']}")
            if "cores" in info:
                extra += (f", fast kernels' row blocks: {info['cores']}"
                          + (" (BLAS one thread per call, set by the worker)" if info.get("blas_one_thread") else "")
                          + (" (beside BLAS's own threads)" if info.get("beside_blas") else "")
                          + (", freed memory kept for reuse" if info.get("keep_freed_memory") else ""))
        rows.append([NAMES[name], pools, f"Python {info['python']}, numpy {info['numpy']}; {extra}"])
    return rows


def environment_section(setting):
    out = [f"### Workers (OpenBLAS: {setting['openblas']})", "",
           md_table(["worker", "thread pools (threadpoolctl)", "library"], worker_rows(setting)), ""]
    peaks = [[NAMES[n], f"{setting['peak_start'][n]:.0f}", f"{setting['peak_end'][n]:.0f}"]
             for n in setting["peak_start"]]
    sizes = ", ".join(str(n) for n in setting["peak_sizes"])
    out += [f"Square float32 GEMM (best of sizes {sizes}; median of 5 each), GFLOP/s, at the "
            "start and end of the timed configs. \"% peak\" below divides by the numpy figure "
            f"(best of the two: {reference_peak(setting):.0f} GFLOP/s).", "",
            md_table(["worker", "start", "end"], peaks), ""]
    return out


def ratio_range(result, name):
    """min-max over rounds of the per-round ratio worker / PyTorch (rounds alternate)."""
    pairs = [a / b for a, b in zip(result["times"][name], result["times"]["torch"])]
    return f"{min(pairs):.2f}-{max(pairs):.2f}"


def workload_table(setting, kind):
    peak = reference_peak(setting)
    names = list(next(iter(setting["configs"].values()))[kind]["median"])
    has_torch = "torch" in names
    headers = ["config", "params", "tokens"] + [f"{NAMES[n]} ms" for n in names]
    headers += [f"{SHORT[n]} / PyTorch" for n in names if n != "torch"] if has_torch else []
    headers += ["fast / PyTorch per round"] if has_torch else []
    headers += ["fast / plain"] + [VARIANTS[n] for n in names if n in VARIANTS]
    headers += ["fast % peak", "rounds x calls", "other load"]
    rows = []
    for name, results in setting["configs"].items():
        r, cfg = results[kind], specs.CONFIGS[name]
        med = r["median"]
        flops = specs.forward_flops(cfg) * (1 if kind == "forward" else 3)
        row = [name, f"{r['setup']['fast']['params'] / 1e6:.2f}M", cfg["batch"] * cfg["seq"]]
        row += [ms(med[n]) for n in names]
        if has_torch:
            row += [f"{med[n] / med['torch']:.2f}x" for n in names if n != "torch"]
            row += [ratio_range(r, "fast")]
        row += [f"{med['fast'] / med['plain']:.2f}x" if "plain" in med else "-"]
        row += [f"{med[n] / med['fast']:.2f}x" for n in names if n in VARIANTS]
        row += [f"{100 * flops / med['fast'] / 1e9 / peak:.0f}%", f"{r['rounds']} x {r['calls']}",
                f"{100 * r['other_load']:.0f}%"]
        rows.append(row)
    return md_table(headers, rows)


def memory_table(setting):
    names = list(next(iter(setting["memory"].values())))
    headers = ["config"] + [f"{NAMES[n]} MiB" for n in names]
    headers += ["fast / PyTorch", "fast above import MiB", "PyTorch above import MiB"] if "torch" in names else []
    rows = []
    for config, records in setting["memory"].items():
        fast, torch = records["fast"], records.get("torch")
        row = [config] + [f"{records[n]['peak'] / MIB:.0f}" for n in names]
        if torch:
            row += [f"{fast['peak'] / torch['peak']:.2f}x", f"{(fast['peak'] - fast['base']) / MIB:.0f}",
                    f"{(torch['peak'] - torch['base']) / MIB:.0f}"]
        rows.append(row + [f"{fast['cache_bytes'] / MIB:.1f}"])
    return md_table(headers + ["fast cache.nbytes MiB"], rows)


def setting_section(setting):
    out = [f"## OpenBLAS {setting['label']}: {setting['openblas']}", "",
           f"Load average (1 min) at the start of this setting {setting['load_start']:.2f}, "
           f"at its end {setting['load_end']:.2f}.", ""]
    out += environment_section(setting)
    out += ["\"other load\": the share of the machine's cores that other processes kept busy "
            "while the rounds ran (from /proc/stat, minus the workers' own CPU time).", ""]
    measured = next(iter(setting["configs"].values()))
    for kind, title in specs.WORKLOADS.items():
        if kind in measured:
            out += [f"### {title[0].upper() + title[1:]}", "", workload_table(setting, kind), ""]
    out += ["### Peak RSS (a fresh process per library and config, 2 training steps with AdamW)", "",
            "\"above import\" = peak minus the RSS after importing the library; cache.nbytes = the "
            "arrays npformer's forward keeps for backward.", "", memory_table(setting), ""]
    return out


def other_loads(results):
    """Every measurement's "other load" (share of the cores other processes kept busy)."""
    loads = []
    for setting in results["settings"]:
        loads += [r["other_load"] for config in setting["configs"].values() for r in config.values()]
        grown = setting.get("growth", {})
        loads += [r["other_load"] for key in ("seq_sweep", "width_sweep", "decode") for r in grown.get(key, [])]
    return loads


def header_section(results):
    run = results["run"]
    loads = other_loads(results)
    return ["# npformer benchmarks", "",
            f"- run: {run['date']}, commit {run['commit']}, `{run['command']}`, "
            f"{run['seconds']:.0f} s in all",
            f"- machine: {run['cpu']}, {run['cores']} cores; {run['threads']} threads per library",
            f"- load average (1 min): {run['load_start']:.2f} at the start, {run['load_end']:.2f} at the "
            f"end, {run['load_max']:.2f} at most during the run (2.0 = both cores busy)",
            f"- other processes kept {100 * statistics.median(loads):.0f}% of the cores busy during the "
            f"median measurement, {100 * max(loads):.0f}% during the worst (\"other load\" in the tables)",
            "- method: each library in its own process; rounds alternate between the processes; "
            f"warm-up >= {run['warmup']} s per process and workload; medians over rounds "
            "(see benchmarks/README.md)"] + \
        ([f"- OpenBLAS: {run['openblas_note']}"] if run.get("openblas_note") else []) + [""]


def render(results):
    """The whole report as Markdown."""
    out = header_section(results)
    out += step_section(results)
    out += targets_section(results)
    for setting in results["settings"]:
        out += setting_section(setting)
    grown = [s for s in results["settings"] if "growth" in s]
    if grown:
        out += growth_section(grown[0], results.get("plot"))
    return "\n".join(out) + "\n"
