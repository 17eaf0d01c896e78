"""Pictures of tokens and their order: the embedding lookup before and after a block, word
order with and without positions, and RoPE's angles past the trained length."""
from __future__ import annotations

import math

import numpy as np

from ..t05_rope import Rotary
from .style import _plt, _table, example, example_figure


# -- 01 from token id to vector -------------------------------------------------------------
def _paired_bars(ax, first, second, labels, title):
    """Two vectors side by side, one bar per component."""
    index = np.arange(len(first))
    ax.bar(index - 0.2, first, 0.4, label=labels[0])
    ax.bar(index + 0.2, second, 0.4, label=labels[1])
    ax.axhline(0, color="0.7", lw=0.8)
    ax.set_xticks(index)
    ax.set_xlabel("分量 i（d = 8）")
    ax.set_title(title, fontsize=9)
    low, high = min(first.min(), second.min()), max(first.max(), second.max())
    ax.set_ylim(low - 0.1 * (high - low), high + 0.45 * (high - low))      # room for the legend
    ax.legend(fontsize=8, loc="upper left")


def token_vectors():
    """Id 17's row in two sentences: identical from the table, different after one block."""
    found, fig, axes = example_figure("token_vectors", 2, figsize=(12, 4.4))
    first, second = (ids.tolist() for ids in found["sentences"])
    labels = [f"句子一 ids {first}", f"句子二 ids {second}"]
    _paired_bars(axes[0], *found["rows_before"], labels,
                 "查表 Embedding：两句里的 ID 17 取到同一行\n（tokens(ids)，与上下文无关）")
    _paired_bars(axes[1], *found["rows_after"], labels,
                 "经过一个 Block（Attention + FFN）之后，同一位置的向量不同了\n"
                 f"（最后的归一化 norm.xhat；最大差 {found['context_gap_after']:.3f}）")
    axes[0].set_ylabel("嵌入向量的分量（初始化标准差 0.02）")
    axes[1].set_ylabel("归一化后的分量")
    fig.suptitle(f"从 Token ID 到向量：教学小模型 d = 8；文章的 d = {found['width']:,} 时，"
                 f"一个 Token 是 {found['width']:,} 个数（float32 共 {found['bytes_per_token']:,} 字节）",
                 fontsize=10)
    return fig


# -- 06 word order -----------------------------------------------------------------------------
WORD_ORDER_PANELS = (("no_positions", "no_positions_gap", "不加位置，不加掩码\npositions='none'"),
                     ("learned", "learned_gap", "可学习位置向量，不加掩码\npositions='learned'"),
                     ("causal_no_positions", "causal_no_positions_gap",
                      "不加位置，加因果掩码\npositions='none', causal"))


def word_order():
    """|output of a character in 猫追狗 - its output in 狗追猫| under three settings."""
    # tall enough for a two-line heading above three-line panel titles and the axis labels
    # below: with less room the layout gives up and the titles overlap
    found, fig, axes = example_figure("word_order", 3, figsize=(12.5, 5.8))
    top = max(float(rows.max()) for rows in found["token_gaps"].values())
    for ax, (key, gap, title) in zip(axes, WORD_ORDER_PANELS):
        _table(ax, found["token_gaps"][key], f"{title}\n最大差 {found[gap]:.1e}", cmap="Oranges",
               vmin=0, vmax=top, row_labels=["狗", "追", "猫"], col_labels=["狗", "追", "猫"],
               xlabel="输出 logits 的分量（词表 V = 3）", ylabel="同一个字")
    fig.suptitle("词序：狗追猫与猫追狗（两层 DecoderLM，float64）里同一个字的输出之差\n"
                 "既没有位置信息也没有掩码时差为 0：模型只看到一袋字，分不出谁追谁", fontsize=10)
    return fig


# -- 21 RoPE past the trained length -------------------------------------------------------------
def rotary_past_trained_length():
    """Each pair's angle within the trained offsets, and the slowest pair's angle beyond them."""
    plt = _plt()
    script = example("rotary_past_the_trained_length")
    found = script.run(lambda *args, **kwargs: None)
    head_dim, trained = script.HEAD_DIM, script.TRAINED
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
    ax = axes[0]
    pairs = np.arange(head_dim // 2)
    for base, marker in ((10_000.0, "o"), (500_000.0, "s")):
        turned = script.turns_within(Rotary(head_dim, base=base), trained)
        count = found["pairs_never_turning"][base]
        ax.plot(pairs, turned, marker, ms=3, label=f"base = {base:,.0f}：{count} 对转不满一圈")
    ax.axhline(2 * math.pi, color="black", ls="--", lw=1, label="一整圈 2π")
    ax.set_yscale("log")
    ax.set_xlabel("第 i 对分量（Rotary.angles 的列，i = 0 最快）")
    ax.set_ylabel(f"位置差 {trained - 1:,} 时转过的角度（弧度）")
    ax.set_title(f"Rotary(head_dim={head_dim})，训练长度 {trained:,}：\n"
                 "虚线以下的慢分量在训练里从没转满一圈", fontsize=9)
    ax.legend(fontsize=8, loc="lower left")

    ax = axes[1]
    rotary = Rotary(head_dim)
    positions = np.arange(2 * trained)
    slowest = rotary.angles(positions)[:, -1]
    squeezed = rotary.angles(positions * trained / (2 * trained))[:, -1]
    ax.axvspan(0, trained - 1, color="0.9", label=f"训练见过的位置 0 … {trained - 1:,}")
    ax.plot(positions, slowest, label="直接外推：角度超出训练范围")
    ax.plot(positions, squeezed, ls="--", label="位置插值 p → p/2：角度留在训练范围内")
    ax.axhline(slowest[trained - 1], color="0.5", lw=0.8)
    ax.text(0, slowest[trained - 1] * 1.03, f"训练中的最大角度 {slowest[trained - 1]:.3f}", fontsize=8)
    ax.set_xlabel("位置 p")
    ax.set_ylabel("最慢一对的角度（弧度，base 10,000）")
    ax.set_title(f"{2 * trained:,} 个位置：最慢一对走到 {slowest[-1]:.3f}，训练中从没见过", fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0, 0.9))
    fig.suptitle("RoPE 超出训练长度：照样能算，但慢分量的角度是训练没见过的（t05_rope.Rotary）",
                 fontsize=10)
    return fig
