"""Pictures of training: attention as a shaded character map in the terminal, and
(with the optional ``plot`` extra, matplotlib) PNG files of the loss curve and
attention heat maps.

The PNGs label their axes with the question's characters. Chinese needs a font with
Chinese glyphs, which many machines lack (matplotlib's own DejaVu Sans has none), so the
``plot`` extra brings one: Noto Sans CJK (SIL Open Font License 1.1, which allows
bundling it with software) in the ``noto-cjk-sans-otc`` package. A CJK font the machine
already has comes first; with neither, the axes are numbered by position.

The terminal map needs nothing: each character of the question is printed with
a mark below it, darker where the chosen position looked more. Every character
gets a slot as wide as the widest one (2 cells as soon as there is a Chinese
character, by its East Asian width), and the marks are plain ASCII, which every
terminal draws one cell wide; block characters such as U+2593 are "ambiguous"
and take two cells in many CJK terminals, which would shift the marks.
"""
from __future__ import annotations

import os
import unicodedata

import numpy as np

SHADES = " .:=#"          # light to dark, one cell wide everywhere
# The packages themselves, which install wherever npformer came from; the extra's name would
# ask PyPI for npformer, where a copy installed from its folder is not. The plot extra's
# packages (pyproject.toml).
INSTALL_HINT = "pip install matplotlib noto-cjk-sans-otc==0.0.1 (npformer's [plot] extra)"
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Zen Hei",
             "WenQuanYi Micro Hei", "SimHei", "Microsoft YaHei", "PingFang SC", "Heiti SC",
             "AR PL UMing CN", "Droid Sans Fallback")


CJK_HINT = ("pip install noto-cjk-sans-otc==0.0.1 (Noto Sans CJK, in npformer's [plot] extra), or a CJK font for the whole "
            "system (e.g. apt install fonts-noto-cjk)")


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed, or no font can draw Chinese; the message says what to install."""


# -- the terminal heat map ---------------------------------------------------------------
def char_width(char):
    """Terminal cells a character takes: 2 for wide (CJK) characters, else 1."""
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def text_width(text):
    """Terminal cells a string takes."""
    return sum(char_width(c) for c in text)


def shade(weight):
    """A mark for a weight in [0, 1] (0 -> blank, 1 -> "#")."""
    level = int(round(float(np.clip(weight, 0, 1)) * (len(SHADES) - 1)))
    return SHADES[level]


def text_heatmap(chars, weights, label=""):
    """Two lines: the characters, and under each a mark as dark as its weight.

    ``weights`` [len(chars)] are scaled by their maximum, so the darkest mark
    sits under the most-read character. ``label`` is printed before both lines.
    """
    weights = np.asarray(weights, dtype=np.float64)
    if len(weights) != len(chars):
        raise ValueError(f"weights: expected {len(chars)} values (one per character), got {len(weights)}")
    scaled = weights / weights.max() if weights.max() > 0 else weights
    slot = max(char_width(c) for c in chars) if len(chars) else 1
    top = label + "".join(c + " " * (slot - char_width(c)) for c in chars)
    bottom = " " * text_width(label) + "".join(shade(w) * slot for w in scaled)
    return top.rstrip() + "\n" + bottom.rstrip()


# -- PNG files (matplotlib) -----------------------------------------------------------------
def require_matplotlib():
    """Import matplotlib with a non-interactive backend, or raise ``PlotUnavailable``."""
    try:
        import matplotlib
    except ImportError:
        raise PlotUnavailable(f"--plot needs matplotlib, which is not installed: {INSTALL_HINT}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _cjk_font():
    """The name of a font with Chinese glyphs: one the machine has, else the ``plot`` extra's
    Noto Sans CJK (registered with matplotlib for this process), else None."""
    from matplotlib import font_manager
    installed = {f.name for f in font_manager.fontManager.ttflist}
    found = next((name for name in CJK_FONTS if name in installed), None)
    path = _extra_font_path()
    if found is None and path is not None:
        font_manager.fontManager.addfont(path)      # each face of the collection, by its name
        installed = {f.name for f in font_manager.fontManager.ttflist if f.fname == path}
        # the Simplified Chinese face; a matplotlib that reads only a collection's first face
        # gets the Japanese one, which has the same characters in Japanese forms
        found = next((name for name in ("Noto Sans CJK SC", "Noto Sans CJK JP") if name in installed),
                     None)
    return found


def require_cjk_font():
    """The name of a font with Chinese glyphs, or ``PlotUnavailable`` saying how to get one:
    the section pictures are labelled in Chinese, and without such a font matplotlib draws
    every character as an empty box (and warns about each)."""
    require_matplotlib()
    font = _cjk_font()
    if font is None:
        raise PlotUnavailable(f"no font with Chinese characters found, and the pictures are "
                              f"labelled in Chinese: {CJK_HINT}")
    return font


def _extra_font_path():
    """The file of the ``plot`` extra's Noto Sans CJK collection, or None if not installed."""
    try:
        import noto_cjk_sans_otc
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(noto_cjk_sans_otc.__file__), "NotoSansCJK-Regular.ttc")
    return path if os.path.isfile(path) else None


def save_figure(fig, path, **options):
    """Write ``fig`` as the PNG ``path``, atomically (a temporary file renamed into place:
    never half a picture, never a device or a pipe written through), and close it."""
    from ..core.fileio import atomic_write
    plt = require_matplotlib()
    try:
        atomic_write(path, lambda f: fig.savefig(f, format="png", **options))
    finally:
        plt.close(fig)
    return path


def plot_loss(history, path, title="training loss"):
    """Loss per step (and its moving average) on a log scale; evaluations as points."""
    plt = require_matplotlib()
    loss = np.asarray(history.loss, dtype=np.float64)
    steps = np.arange(1, len(loss) + 1)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, loss, lw=0.8, alpha=0.5, label="training loss of each step's batch")
    window = max(1, len(loss) // 50)
    if window > 1:
        smooth = np.convolve(loss, np.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1:], smooth, lw=1.8, label=f"moving average ({window} steps)")
    evals = [e for e in history.evals if "heldout_loss" in e]
    if evals:
        ax.plot([e["step"] for e in evals], [e["heldout_loss"] for e in evals], "o-",
                label="held-out loss")
    ax.set_yscale("log")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy per predicted token (nats, log scale)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def _drawable(text, font):
    """True if the default font (or ``font``) has glyphs for every character of ``text``."""
    return font is not None or all(ord(c) < 0x2E80 for c in text)


def plot_attention(chars, weights, path, question="", what="attention, mean over heads"):
    """Write the heat maps of ``attention_figure`` to the PNG ``path``, the question also
    in its metadata; returns ``path``."""
    fig = attention_figure(chars, weights, question, what)
    return save_figure(fig, path, dpi=120, metadata={"Description": question or what})


def attention_figure(chars, weights, question="", what="attention, mean over heads"):
    """Heat maps of attention ``weights`` [layers, N, N] (mean over heads) over ``chars``.

    The axes are labelled with the characters and the title names ``question``; without
    a font that has their glyphs (Chinese needs a CJK font) the axes are numbered by
    position and the title says so. Returns the matplotlib figure.
    """
    plt = require_matplotlib()
    weights = np.asarray(weights, dtype=np.float64)
    font = _cjk_font()
    drawable = _drawable("".join(chars) + question, font)
    labels = [c if c.isprintable() else repr(c)[1:-1] for c in chars] if drawable else \
        [str(i) for i in range(len(chars))]
    n_layers = len(weights)
    fig, axes = plt.subplots(1, n_layers, figsize=(4.2 * n_layers + 0.8, 4.6), squeeze=False)
    kw = {"fontfamily": font} if font else {}
    for layer, ax in enumerate(axes[0]):
        image = ax.imshow(weights[layer], cmap="Blues", vmin=0, vmax=1)
        ax.set_xticks(range(len(labels)))
        ax.set_yticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=7, **kw)
        ax.set_yticklabels(labels, fontsize=7, **kw)
        ax.set_xlabel("key: the position read")
        ax.set_ylabel("query: the position reading")
        ax.set_title(f"layer {layer}", fontsize=9)
    fig.colorbar(image, ax=list(axes[0]), shrink=0.8, label="attention weight")
    if drawable:
        heading = f"{what}\n{question}" if question else what
    else:
        heading = (f"{what}\nno CJK font found ({INSTALL_HINT}): positions numbered "
                   f"0-{len(chars) - 1}; the question is printed in the terminal and stored in "
                   f"this PNG's metadata")
    fig.suptitle(heading, fontsize=9, **kw)
    return fig


def plot_all(directory, history, attention_maps=()):
    """Write loss.png and attention_{i}.png into ``directory``; returns the paths.

    ``attention_maps``: (chars, weights [layers, N, N], question) for each picture.
    """
    require_matplotlib()
    os.makedirs(directory, exist_ok=True)
    paths = [plot_loss(history, os.path.join(directory, "loss.png"))]
    for i, (chars, weights, question) in enumerate(attention_maps):
        paths.append(plot_attention(chars, weights, os.path.join(directory, f"attention_{i}.png"),
                                    question))
    return paths
