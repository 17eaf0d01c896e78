"""Pictures of depth: a stack without residuals losing its input, and the pieces that stacked
ReLU layers can cut a line into."""
from __future__ import annotations

import numpy as np

from .style import example_figure, label_axes

# -- 22 a deep stack without residuals --------------------------------------------------------
MEASURES = (("input_effect", "输入的影响：输出变化 / 输入变化"),
            ("spread", "各位置向量的差异（0 = 全都一样）"),
            ("grad_ratio", "传回输入的梯度 |d input| / |d output|"))


def deep_stack_without_residuals():
    """Effect of the input, spread of the positions and gradient ratio against depth."""
    found, fig, axes = example_figure("deep_stack_without_residuals", 3, figsize=(15, 4.4))
    depths = [key for key in found if isinstance(key, int)]
    for ax, (measure, title) in zip(axes, MEASURES):
        for stack, label in (("residual", "有残差 y = x + f(x)"), ("plain", "去掉残差 y = f(x)")):
            ax.plot(depths, [found[d][stack][measure] for d in depths], "o-", label=label)
        label_axes(ax, "堆叠的 Block 数（PreNormBlock）", "", title, log="xy", legend="lower left")
        ax.set_yscale("log")                               # powers of ten: the values reach 1e-16
        ax.set_xticks(depths)
        ax.set_xticklabels(depths)
    fig.suptitle("残差连接：去掉残差后，64 层之后各位置几乎变成同一个向量，输入的痕迹和梯度都传不过来"
                 "\n（宽度 32、4 个头、随机初始化；输出投影全为 0 时，有残差的堆叠恰好是恒等映射）",
                 fontsize=10)
    return fig


# -- 25 depth and what it can express -----------------------------------------------------------
def depth_and_what_it_can_express():
    """k ReLU tents in a row (2^k pieces), eight linear layers (one line), one wide layer."""
    found, fig, axes = example_figure("depth_and_what_it_can_express", 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [1.3, 1]})
    x = np.linspace(0.0, 1.0, len(found["linear_output"]))
    ax = axes[0]
    for k, y in found["zigzag"].items():
        ax.plot(x, y[:, 0] + 1.3 * (k - 1), lw=1)
        ax.text(1.02, 1.3 * (k - 1) + 0.3, f"深度 {k}（{2 * k} 个单元）：{found['zigzag_pieces'][k]} 段",
                fontsize=8)
    ax.set_xlim(0, 1.3)
    ax.set_xticks(np.linspace(0, 1, 6))
    ax.set_yticks([])
    ax.set_xlabel("输入 x")
    ax.set_title("FFN 里的两个 ReLU 单元组成一个“帐篷”，k 个串起来：2ᵏ 段直线\n"
                 "（每条曲线向上平移，便于比较）", fontsize=9)
    ax = axes[1]
    ax.plot(x, found["linear_output"][:, 0], label=f"八层 Linear、没有激活：{found['linear_pieces']} 条直线")
    ax.plot(x, found["wide_output"][:, 0],
            label=f"一层 12 个 ReLU 单元并排：[0, 1] 上 {found['wide_pieces']} 段（至多 13 段）")
    bends = found["wide_bends"]
    for bend in bends[(bends > 0) & (bends < 1)]:
        ax.axvline(bend, color="0.85", lw=0.8)
    ax.set_xlabel("输入 x")
    ax.set_ylabel("输出")
    ax.set_title("不加激活，多少层都合成一层；并排的单元只能加折点，不能让折点翻倍", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    fig.suptitle("深度与表达能力：非线性的层叠起来，能表示的函数才变多（t07_ffn.FFN、t02_linear.Linear）",
                 fontsize=10)
    return fig
