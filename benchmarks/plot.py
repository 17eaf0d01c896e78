"""The PNG of how cost grows (matplotlib, optional): log-log time against N, d and context."""
from __future__ import annotations

from benchmarks.tables import NAMES
from benchmarks.growth_report import sweep_exponents

STYLES = {"fast": "o-", "plain": "s--", "torch": "^-"}


def _plain_ticks(axis, ticks):
    from matplotlib.ticker import NullFormatter, ScalarFormatter
    axis.set_xticks(ticks, [str(t) for t in ticks])
    axis.xaxis.set_minor_formatter(NullFormatter())
    axis.yaxis.set_major_formatter(ScalarFormatter())
    axis.yaxis.set_minor_formatter(NullFormatter())


def _sweep_panel(axis, rows, xlabel):
    fits = sweep_exponents(rows)
    sizes = [r["size"] for r in rows]
    for name in rows[0]["median"]:
        axis.plot(sizes, [1e3 * r["median"][name] for r in rows], STYLES[name],
                  label=f"{NAMES[name]} (exponent {fits[name][0]:.2f})")
    start = 1e3 * rows[0]["median"]["fast"]
    for power in (1, 2):        # guides: time proportional to size and to size squared
        axis.plot(sizes, [start * (s / sizes[0]) ** power for s in sizes], ":", color="grey",
                  linewidth=0.8, label=f"size ** {power}")
    axis.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="training step, ms")
    _plain_ticks(axis, sizes)
    axis.legend(fontsize=8)


def _decode_panel(axis, rows):
    contexts = [r["context"] for r in rows]
    for name in rows[0]["median"]:
        axis.plot(contexts, [1e3 * r["median"][name] for r in rows], STYLES[name], label=NAMES[name])
    axis.set(xscale="log", xlabel="context length", ylabel="KV-cached decoding, ms per token")
    _plain_ticks(axis, contexts)
    axis.set_ylim(0, 1.3e3 * max(max(r["median"].values()) for r in rows))
    axis.legend(fontsize=8)


def save_plot(growth, path):
    """Write the three panels to ``path``; returns the Markdown to show it, or a note why not."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "(matplotlib is not installed: the plot was skipped; the tables below have every figure.)"
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    _sweep_panel(axes[0], growth["seq_sweep"], "sequence length N")
    _sweep_panel(axes[1], growth["width_sweep"], "width d")
    _decode_panel(axes[2], growth["decode"])
    figure.tight_layout()
    from npformer.core.fileio import atomic_write
    atomic_write(path, lambda f: figure.savefig(f, format="png", dpi=110))
    plt.close(figure)
    return f"![training step against N and d, decoding against context]({path.name})"
