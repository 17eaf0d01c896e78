"""The targets of the fast track, each printed as met or NOT met with the measured figure.

Defined for the fast track, 2 threads, each library in its own process, one run; judged
under every OpenBLAS setting of the run ("unset" is the one the targets name). The training
step of the targets is the one without the optimizer (forward, mean cross-entropy,
backward), and the fast track's time is its best way of using the cores: by itself (BLAS
its own threads) or with BLAS one thread per call and its own blocks on every core.
"""
from __future__ import annotations

from benchmarks import specs
from benchmarks.tables import MIB, md_table, reference_peak

TRAIN_TARGETS = {"tiny": 1.00, "small": 0.70, "medium": 0.70, "llama": 0.80}
PLAIN_TARGETS = {"small": 2.00, "medium": 2.00, "llama": 2.00}
FORWARD_TARGETS = {"small": 0.80, "medium": 0.80}
TRAIN_STEP = "train_no_opt"           # the step the targets time: no optimizer
FAST_WORKERS = ("fast", "pinned")     # the fast track's two ways of using the cores
PEAK_SHARE_TARGET = ("medium", 0.65)


def best_fast(medians):
    """(worker name, seconds) of the fast track's quicker way of using the cores."""
    name = min((n for n in FAST_WORKERS if n in medians), key=lambda n: medians[n])
    return name, medians[name]


def ratio_target(setting, kind, config, limit, worker=None):
    """(measured text, met) for "npformer / PyTorch <= limit" on one workload: the best fast
    worker's time, or ``worker``'s."""
    result = setting["configs"].get(config, {}).get(kind)
    if not result or "torch" not in result["median"] or (worker and worker not in result["median"]):
        return "not measured", None
    medians = result["median"]
    seconds = medians[worker] if worker else best_fast(medians)[1]
    ratio = seconds / medians["torch"]
    return f"{ratio:.2f}x", ratio <= limit


def peak_share_target(setting, config, share):
    result = setting["configs"].get(config, {}).get(TRAIN_STEP)
    if not result:
        return "not measured", None
    achieved = 3 * specs.forward_flops(specs.CONFIGS[config]) / best_fast(result["median"])[1] / 1e9
    fraction = achieved / reference_peak(setting)
    return f"{100 * fraction:.0f}% ({achieved:.0f} of {reference_peak(setting):.0f} GFLOP/s)", fraction >= share


def memory_target(setting, config):
    records = setting["memory"].get(config, {})
    if "torch" not in records:
        return "not measured", None
    fast, torch = records["fast"]["peak"], records["torch"]["peak"]
    return f"{fast / MIB:.0f} vs {torch / MIB:.0f} MiB", fast <= torch


def same_code_spread(settings):
    """(lowest, highest) ratio of the fast worker's median to the plain worker's, over all workloads."""
    ratios = []
    for setting in settings:
        medians = [r["median"] for config in setting["configs"].values() for r in config.values()]
        grown = setting.get("growth", {})
        medians += [r["median"] for key in ("seq_sweep", "width_sweep", "decode") for r in grown.get(key, [])]
        ratios += [m["fast"] / m["plain"] for m in medians if "plain" in m]
    return min(ratios), max(ratios)


def target_rows():
    """[(description, function(setting) -> (measured, met))] in the order of the issue."""
    rows = [(f"training step {c}: fast <= {limit:.2f}x PyTorch",
             lambda s, c=c, limit=limit: ratio_target(s, TRAIN_STEP, c, limit))
            for c, limit in TRAIN_TARGETS.items()]
    rows += [(f"training step {c}: plain <= {limit:.2f}x PyTorch",
              lambda s, c=c, limit=limit: ratio_target(s, TRAIN_STEP, c, limit, worker="plain"))
             for c, limit in PLAIN_TARGETS.items()]
    rows += [(f"forward alone {c}: fast <= {limit:.2f}x PyTorch",
              lambda s, c=c, limit=limit: ratio_target(s, "forward", c, limit))
             for c, limit in FORWARD_TARGETS.items()]
    config, share = PEAK_SHARE_TARGET
    rows.append((f"training step {config}: fast >= {100 * share:.0f}% of the numpy matmul peak",
                 lambda s: peak_share_target(s, config, share)))
    rows += [(f"peak RSS {c}: fast <= PyTorch", lambda s, c=c: memory_target(s, c))
             for c in specs.CONFIGS]
    return rows


def verdict(met):
    return "not measured" if met is None else "met" if met else "**NOT met**"


def targets_section(results):
    """The targets table: one measured / verdict column pair per OpenBLAS setting."""
    settings = results["settings"]
    headers = ["target"]
    for s in settings:
        headers += [f"OpenBLAS {s['label']}", "verdict"]
    rows = []
    for description, judge in target_rows():
        row = [description]
        for s in settings:
            measured, met = judge(s)
            row += [measured, verdict(met)]
        rows.append(row)
    out = ["## Targets (fast track, each library in its own process, this run)", "",
           "The training step: forward, mean cross-entropy, backward, no optimizer; \"fast\" is "
           "the quicker of the fast track by itself and with BLAS one thread per call.", ""]
    if results["run"]["threads"] != 2:
        out += [f"The targets are defined at 2 threads; this run used {results['run']['threads']}.", ""]
    twins = {s["workers"]["fast"]["fast_twins"] for s in settings}
    if twins == {0}:
        low, high = same_code_spread(settings)
        out += ["The fast track registered no fast twins in this run: \"fast\" and \"plain\" ran "
                "the same code in two processes, so their difference is measurement noise: "
                f"fast / plain ranged from {low:.2f} to {high:.2f} over every timed workload of "
                "this run.", ""]
    return out + [md_table(headers, rows), ""]
