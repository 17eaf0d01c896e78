"""The look shared by every section picture: a CJK font first, heat maps with their numbers
written in, may-read tables labelled as masks, log-scaled axes; and the worked examples' own
results, so that a picture draws the numbers its example prints."""
from __future__ import annotations

import numpy as np

from .plot import require_cjk_font, require_matplotlib

_styled = False


def example(name):
    """The worked example script ``name`` (a number or a fragment of its name), imported."""
    from ..worked import find_examples_dir, list_examples, select
    return select(list_examples(find_examples_dir()), name).load()


def results(name):
    """What worked example ``name`` returns from ``run``, with its printing silenced."""
    return example(name).run(lambda *args, **kwargs: None)


def example_figure(name, ncols, figsize, **subplots):
    """What worked example ``name`` returns, and a figure of ``ncols`` panels side by side to
    draw it in: (results, figure, axes)."""
    found = results(name)
    fig, axes = _plt().subplots(1, ncols, figsize=figsize, **subplots)
    return found, fig, axes


def _plt():
    """pyplot with a CJK font first and DejaVu Sans behind it (for the glyphs CJK fonts lack)."""
    global _styled
    plt = require_matplotlib()
    if not _styled:
        font = require_cjk_font()          # Chinese labels: a box for every character without one
        plt.rcParams["font.family"] = ([font] if font else []) + ["DejaVu Sans"]
        plt.rcParams["axes.unicode_minus"] = False      # CJK fonts lack U+2212
        plt.rcParams["figure.constrained_layout.use"] = True   # room for titles and colorbars
        _styled = True
    return plt


def _table(ax, values, title, row_labels=None, col_labels=None, cmap="Blues", fmt="{:.2f}",
           vmin=None, vmax=None, xlabel="键 key j（被读取的位置）", ylabel="查询 query i（读取者）"):
    """A heat map with each cell's number written in it."""
    values = np.asarray(values, dtype=np.float64)
    image = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax)
    n, m = values.shape
    ax.set_xticks(range(m))
    ax.set_yticks(range(n))
    ax.set_xticklabels(col_labels if col_labels is not None else range(m), fontsize=8)
    ax.set_yticklabels(row_labels if row_labels is not None else range(n), fontsize=8)
    for i in range(n):
        for j in range(m):
            v = values[i, j]
            red, green, blue, _ = image.cmap(image.norm(v))
            dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5
            ax.text(j, i, fmt.format(v) if np.isfinite(v) else "-inf", ha="center", va="center",
                    fontsize=8, color="white" if dark else "black")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    return image


def _mask_table(ax, allowed, title, xlabel="键 key j", ylabel="查询 query i", labels=None):
    """A boolean may-read table: dark = may read (True), light = masked (False, -inf)."""
    allowed = np.asarray(allowed, dtype=bool)
    ax.imshow(allowed, cmap="Greys", vmin=-0.4, vmax=1.3)
    n, m = allowed.shape
    for i in range(n):
        for j in range(m):
            ax.text(j, i, "读" if allowed[i, j] else "×", ha="center", va="center", fontsize=8,
                    color="white" if allowed[i, j] else "black")
    ax.set_xticks(range(m))
    ax.set_yticks(range(n))
    if labels is not None:
        ax.set_xticklabels(labels[1], fontsize=8)
        ax.set_yticklabels(labels[0], fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)



def label_axes(ax, xlabel, ylabel, title, log="", base=2, fontsize=9, legend="best"):
    """Label and title ``ax``; ``log`` names the logarithmic axes ("x", "y", "xy") with ``base``;
    ``legend`` is where the legend goes (None: no legend)."""
    if "x" in log:
        ax.set_xscale("log", base=base)
    if "y" in log:
        ax.set_yscale("log", base=base)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=fontsize)
    if legend is not None:
        ax.legend(fontsize=8, loc=legend)
