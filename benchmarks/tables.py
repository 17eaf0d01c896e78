"""Small helpers shared by the report's sections: names, units, Markdown tables, fits."""
from __future__ import annotations

import math
import statistics

NAMES = {"fast": "npformer fast", "pinned": "npformer fast, BLAS 1 thread",
         "beside": "npformer fast, blocks beside BLAS threads", "plain": "npformer plain", "torch": "PyTorch"}
VARIANTS = {"pinned": "BLAS 1 thread / fast", "beside": "beside BLAS / fast"}   # fast run other ways
SHORT = {"fast": "fast", "pinned": "fast BLAS 1 thread", "beside": "fast beside BLAS", "plain": "plain"}
MIB = 2 ** 20


def ms(seconds):
    """Milliseconds with three significant figures or so."""
    value = seconds * 1e3
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def md_table(headers, rows):
    """A Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def exponent(sizes, times):
    """Least-squares slope of log(time) against log(size): time grows as size ** slope."""
    xs, ys = [math.log(s) for s in sizes], [math.log(t) for t in times]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def reference_peak(setting):
    """The numpy GEMM peak of the run: the best of the fast worker's two measurements (BLAS
    on every thread for these, whatever the worker's own setting)."""
    return max(setting["peak_start"]["fast"], setting["peak_end"]["fast"])
