"""Pictures of what attention reads: averaging against a query's match, X against separate
projections, one head against two, and a weight against what a position adds."""
from __future__ import annotations

import numpy as np

from .style import _table, example_figure


def _grouped_bars(ax, groups, series, title, ylim=(0, 1.15), fmt="%.3f", padding=0, legend="upper right"):
    """Bars grouped by ``groups``; ``series`` maps a legend label to one value per group; each bar's
    number ``padding`` points above it."""
    index = np.arange(len(groups))
    width = 0.8 / len(series)
    for k, (label, heights) in enumerate(series.items()):
        bars = ax.bar(index + (k - (len(series) - 1) / 2) * width, heights, width, label=label)
        ax.bar_label(bars, fmt=fmt, fontsize=8, padding=padding)
    ax.set_xticks(index)
    ax.set_xticklabels(groups, fontsize=9)
    ax.set_ylim(*ylim)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc=legend)


# -- 18 averaging vs attention ---------------------------------------------------------------
QUESTIONS = {"who pays?": "问：谁承担运费？", "how long?": "问：多久到账？"}


def averaging_vs_attention():
    """Reading weights on A (says who pays) and B (says when) for two questions."""
    found, fig, axes = example_figure("averaging_vs_attention", 2, figsize=(12, 4.4), sharey=True)
    groups = list(QUESTIONS.values())
    even = found["equal_scores_weights"]
    _grouped_bars(axes[0], groups, {"读 A（讲谁承担）": [even[0]] * 2, "读 B（讲到账时间）": [even[1]] * 2},
                  "直接平均：不管问什么，权重都是 [0.5, 0.5]\n（= 所有分数相等的 attention_forward）")
    weights = [found["attention"][question]["weights"] for question in QUESTIONS]
    _grouped_bars(axes[1], groups, {"读 A（讲谁承担）": [w[0] for w in weights],
                                    "读 B（讲到账时间）": [w[1] for w in weights]},
                  "Attention：问题是 Query，与各 Key 的匹配决定权重\n"
                  "匹配的一方得 sigmoid(4/√2) ≈ 0.944，另一方仍分到余下的")
    axes[0].set_ylabel("读取权重 weights")
    fig.suptitle("为什么不直接平均：平均的读法与问题无关，注意力的读法随 Query 改变（Self-Attention）",
                 fontsize=10)
    return fig


# -- 19 X directly vs separate projections ------------------------------------------------------
FEATURES = ["质量问题", "无理由退货", "商家承担", "买家承担"]


def separate_projections():
    """Q = K = X scores, a Wq that looks one position back, and what each way hands over."""
    found, fig, axes = example_figure("separate_projections", 3, figsize=(16, 4.8), gridspec_kw={"width_ratios": [1, 1, 1.25]})
    _table(axes[0], found["scores"], "直接用 X：Q = K = X\n分数表对称，每行最大的是自己", cmap="RdBu_r",
           vmin=-np.abs(found["scores"]).max(), vmax=np.abs(found["scores"]).max())
    _table(axes[1], found["shift_weights"], "单独的 Wq（K = X）：位置 i 找 i − 1\n"
           "因果权重 weights，第 3 行 0.849 落在位置 2", vmin=0, vmax=1)
    ax = axes[2]
    index = np.arange(len(FEATURES))
    bars = ax.bar(index - 0.2, found["direct_output"], 0.4, label="直接用 X：匹配用的类型特征也混进输出")
    ax.bar_label(bars, fmt="%.3f", fontsize=8)
    bars = ax.bar(index[2:] + 0.2, found["projected_output"], 0.4,
                  label="Wq、Wk 只看类型，Wv 只取条件：只剩答案")
    ax.bar_label(bars, fmt="%.3f", fontsize=8)
    ax.set_xticks(index)
    ax.set_xticklabels(FEATURES, fontsize=9)
    ax.set_ylim(0, 1.25)
    ax.set_ylabel("输出 output 的各分量")
    ax.set_title("问“质量问题退货谁付运费”，读两个较早的位置", fontsize=9)
    ax.legend(fontsize=8, loc="upper right")
    fig.suptitle("一份输入，三种投影：Q、K、V 各有一个矩阵（MultiHeadAttention.qkv），"
                 "“怎么匹配”和“传什么”才能分开", fontsize=10)
    return fig


# -- 23 one head vs two -------------------------------------------------------------------------
CONTEXTS = ["A A", "B B", "A B"]


def one_head_versus_two():
    """The reader's two answers for three contexts, fitted with one head and with two."""
    found, fig, axes = example_figure("one_head_versus_two", 2, figsize=(12, 4.4), sharey=True)
    targets = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    for ax, heads in zip(axes, (1, 2)):
        fitted = found["trained"][heads]
        _grouped_bars(ax, [f"上下文 {c}" for c in CONTEXTS],
                      {"答案分量 0：有没有 A": fitted["answers"][:, 0],
                       "答案分量 1：有没有 B": fitted["answers"][:, 1]},
                      f"{heads} 个头（n_heads={heads}），AdamW 训练后\n"
                      f"总平方误差 {fitted['loss']:.3f}", ylim=(0, 1.6), padding=5)
        ax.plot(np.arange(3) - 0.2, targets[:, 0], "k_", ms=22, mew=2)
        ax.plot(np.arange(3) + 0.2, targets[:, 1], "k_", ms=22, mew=2, label="目标 target")
        ax.legend(fontsize=8, loc="upper center", ncol=3)
    axes[0].set_ylabel("读者位置的输出")
    fig.suptitle("一个头只有一行权重：A B 的答案只能是 A A 与 B B 答案的加权平均，误差至少 1/3；"
                 "\n两个头（总宽度相同）各读一个事实，误差降到 0（MultiHeadAttention）", fontsize=10)
    return fig


# -- 24 a weight is not a cause ---------------------------------------------------------------
def weights_are_not_causes():
    """The article's two shares, and weight against effect for three keys."""
    found, fig, axes = example_figure("weights_are_not_causes", 2, figsize=(12, 4.6))
    mix = found["mix"]
    ax = axes[0]
    parts = ["输出分量 0", "输出分量 1"]
    a_share, b_share = mix["shares"]
    ax.bar(parts, a_share, label=f"A 贡献 w_A·v_A（w_A = {mix['weights'][0]:.3f}）")
    ax.bar(parts, b_share, bottom=a_share, label=f"B 贡献 w_B·v_B（w_B = {mix['weights'][1]:.3f}）")
    for i, total in enumerate(mix["output"]):
        ax.text(i, total + 0.05, f"{total:.3f}", ha="center", fontsize=9)
    ax.set_ylim(0, 1.9)
    ax.set_title("输出 = Σ wⱼ vⱼ：[1.340, 1.321] 是两份贡献之和\nB 的权重小，但分量 1 全靠它", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    effect = found["effect"]
    moved = [float(np.abs(effect["zeroed"][name]).max()) for name in "ABC"]
    _grouped_bars(axes[1], ["A：v = [0, 0]", "B：v = [1, 0]", "C：v = [0, 10]"],
                  {"注意力权重 weights": effect["weights"], "把 v 置零，输出变化多少": moved},
                  "三个位置：权重最大的 A 什么也没贡献\n权重只有 0.02 的 C 影响最大", ylim=(0, 1.05))
    fig.suptitle("权重高不等于原因：一个位置加进输出的是 权重 × 值（attention_forward）", fontsize=10)
    return fig
