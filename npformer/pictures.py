"""Pictures of the tutorial's sections: one PNG per thing a section has to show.

Every picture is computed here with npformer's own functions (the same ones the worked
examples print), then drawn with matplotlib, labelled in the article's Chinese terms with
the code's names beside them ("因果掩码 causal_mask"). matplotlib is optional: it is
imported only when a picture is drawn, and a missing one raises ``PlotUnavailable`` whose
message names ``pip install 'npformer[plot]'``.

    npformer examples 3 --plot DIR      the pictures of worked example 03
    npformer tour --plot DIR            the tiny decoder's per-head maps and its next token
    from npformer import pictures
    pictures.draw(3, "out/")            the same from Python; returns the paths written

``PICTURES`` maps a worked example's number to its pictures (file name, drawing function).
A drawing function takes no argument and returns a matplotlib figure.
"""
from __future__ import annotations

import math
import os

import numpy as np

from .cli.plot import INSTALL_HINT, PlotUnavailable, _cjk_font, require_matplotlib
from .t01_embedding import sinusoid_table
from .t03_softmax import softmax
from .t04_attention import MultiHeadAttention, causal_mask, padding_mask
from .t05_rope import Rotary, rotate
from .t06_activations import gelu_forward, relu_forward, silu_forward
from .t07_ffn import swiglu_gate_forward
from .t08_norm import layernorm_forward, rmsnorm_forward
from .t14_moe import MoE

__all__ = ["PICTURES", "TOUR_PICTURES", "PlotUnavailable", "INSTALL_HINT", "draw", "draw_tour",
           "save"]

_styled = False


def _plt():
    """pyplot with a CJK font first and DejaVu Sans behind it (for the glyphs CJK fonts lack)."""
    global _styled
    plt = require_matplotlib()
    if not _styled:
        font = _cjk_font()
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


# -- 02 attention by hand -------------------------------------------------------------------
def attention_by_hand():
    """q = [1, 0] against keys [1, 0], [0, 1]: scores, scaled scores, weights, and the mix."""
    plt = _plt()
    q = np.array([1.0, 0.0])
    keys = np.array([[1.0, 0.0], [0.0, 1.0]])
    values = np.array([[2.0, 0.0], [0.0, 4.0]])
    scores = keys @ q                                    # [1, 0]
    scaled = scores / math.sqrt(2)                       # [0.707, 0]
    weights = softmax(scaled)                            # [0.670, 0.330]
    output = weights @ values                            # [1.340, 1.321]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
    names = ["位置 A", "位置 B"]
    for ax, data, title in ((axes[0], scores, "分数 scores = q·k"),
                            (axes[1], scaled, "缩放后 scaled = q·k / √2"),
                            (axes[2], weights, "权重 weights = softmax(scaled)")):
        bars = ax.bar(names, data, color=["tab:blue", "tab:orange"])
        ax.bar_label(bars, fmt="%.3f", fontsize=9)
        ax.set_title(title, fontsize=10)
        ax.set_ylim(0, 1.15)
    fig.suptitle(f"手算一次 Attention：q=[1,0]，输出 output = 0.670×[2,0] + 0.330×[0,4] = "
                 f"[{output[0]:.3f}, {output[1]:.3f}]", fontsize=10)
    return fig


# -- 03 the score table, its softmax and the masks ------------------------------------------
def _four_positions():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 8))                          # X: 4 positions x 8 numbers
    wq, wk = rng.normal(size=(8, 4)) / math.sqrt(8), rng.normal(size=(8, 4)) / math.sqrt(8)
    return (x @ wq) @ (x @ wk).T / math.sqrt(4)          # [4, 4] Q K^T / sqrt(D)


def score_table():
    """The 4 x 4 score table Q K^T / sqrt(D), its causal softmax and the plain softmax."""
    plt = _plt()
    scores = _four_positions()
    causal = causal_mask(4)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.4))
    image = _table(axes[0], scores, "分数矩阵 scores = Q K^T / √D（4×4）", cmap="RdBu_r",
                   vmin=-np.abs(scores).max(), vmax=np.abs(scores).max())
    fig.colorbar(image, ax=axes[0], shrink=0.75)
    _table(axes[1], softmax(scores), "不加掩码：softmax(scores)\n每行和为 1，能读到未来", vmin=0, vmax=1)
    _table(axes[2], softmax(scores, mask=causal),
           "加因果掩码 M：softmax(scores + M)\n未来位置权重为 0", vmin=0, vmax=1)
    fig.suptitle("第 i 行第 j 列：位置 i 读取位置 j 的分数与权重（权重 weights，t03_softmax.softmax）",
                 fontsize=10)
    return fig


def masks():
    """The causal mask (may read itself and earlier) and a left-padding mask, labelled as masks."""
    plt = _plt()
    words = ["商家", "承担", "运费", "吗"]
    causal = causal_mask(4)
    padded = padding_mask(lengths=np.array([2]), n=4, side="left")[0, 0, 0]       # [N] keys
    both = causal & padded[None, :]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.4))
    _mask_table(axes[0], causal, "因果掩码 causal_mask(4)\n只能读自己和之前的位置",
                labels=(words, words))
    pad_words = ["[pad]", "[pad]", "运费", "谁承担"]
    _mask_table(axes[1], np.broadcast_to(padded, (4, 4)),
                "填充掩码 padding_mask(lengths=[2], side='left')\n左边补了两个空位，谁都不读",
                labels=(pad_words, pad_words))
    _mask_table(axes[2], both, "两类掩码同时生效 causal & padding\n（补齐位置的行全被遮住，输出定义为 0）",
                labels=(pad_words, pad_words))
    fig.suptitle("掩码 M（遮罩 mask）：“读”= 允许（分数不变），“×”= 分数设为 -inf，softmax 后权重为 0",
                 fontsize=10)
    return fig


# -- 04 multi-head: one map per head --------------------------------------------------------
def heads():
    """Width 8, 2 heads of width 4: each head's own causal weight table."""
    plt = _plt()
    rng = np.random.default_rng(7)
    attn = MultiHeadAttention(8, 2, rng=rng, dtype=np.float64)
    x = rng.normal(size=(1, 6, 8))                       # X [B, N, 8]
    _, cache = attn.forward(x, mask=causal_mask(6))
    weights = cache.weights[0]                           # [H, N, N]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.4))
    for h, ax in enumerate(axes):
        _table(ax, weights[h], f"头 head {h}：权重 weights[0, {h}]（[N, N]）", vmin=0, vmax=1)
    fig.suptitle("多头注意力 MultiHeadAttention(d=8, H=2)：X [B,N,8] → Q [B,2,N,4]，"
                 "每个头一张表，读法不同", fontsize=10)
    return fig


# -- 05 positions: the sinusoid table and a RoPE rotation ----------------------------------
def sinusoid():
    """The sinusoid position table PE[p, i] for 64 positions and width 32."""
    plt = _plt()
    table = sinusoid_table(64, 32)                       # [max_len, d]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [1.3, 1]})
    image = axes[0].imshow(table.T, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1)
    axes[0].set_xlabel("位置 position p")
    axes[0].set_ylabel("分量 i（维度）")
    axes[0].set_title("正弦位置表 sinusoid_table(64, 32)：左边几行快、下面几行慢", fontsize=9)
    fig.colorbar(image, ax=axes[0])
    for i in (0, 2, 8, 16):
        axes[1].plot(table[:, i], label=f"分量 {i}")
    axes[1].set_xlabel("位置 position p")
    axes[1].set_title("几个分量随位置变化：频率各不相同", fontsize=9)
    axes[1].legend(fontsize=8, loc="lower left")
    fig.suptitle("位置向量 position_embedding：xᵢ = token_embeddingᵢ + position_embeddingᵢ "
                 "（SinusoidalPositions）", fontsize=10)
    return fig


def rope():
    """RoPE: q, k = [1, 0] turned by their positions; the score depends only on the offset."""
    plt = _plt()
    rotary = Rotary(head_dim=2, layout="interleaved")    # one pair, 1 radian per position

    def turned(vector, angle):
        cos, sin = np.cos(angle), np.sin(angle)
        return rotate(np.asarray(vector, dtype=np.float64), np.array([cos]), np.array([sin]),
                      layout="interleaved")

    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    ax = axes[0]
    circle = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(circle), np.sin(circle), color="0.85")
    for angle, color, text in ((0, "tab:blue", "q 在位置 0\n（不转）"),
                               (math.radians(60), "tab:orange", "k 转 60°"),
                               (math.radians(100), "tab:green", "q 转 100°"),
                               (math.radians(160), "tab:red", "k 转 160°")):
        v = turned([1.0, 0.0], angle)
        ax.annotate("", xy=v, xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": color, "lw": 2})
        ax.text(1.12 * v[0], 1.12 * v[1], text, color=color, fontsize=9, ha="center")
    ax.set_aspect("equal")
    ax.set_xlim(-1.6, 1.6)
    ax.set_ylim(-1.4, 1.5)
    ax.set_title("旋转 rotate：[a,b] → [a cosθ − b sinθ, a sinθ + b cosθ]\n"
                 "差 60° 的两对点积都是 0.5：(0°,60°) 与 (100°,160°)", fontsize=9)
    # the score q_i . k_j of RoPE with 8 features at every (i, j): constant along diagonals
    rope8 = Rotary(head_dim=8)
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=8), rng.normal(size=8)
    positions = np.arange(12)
    angles = rope8.angles(positions)                     # [N, D/2]
    cos, sin = np.cos(angles), np.sin(angles)
    q_rot = rotate(np.broadcast_to(q, (12, 8)), cos, sin)
    k_rot = rotate(np.broadcast_to(k, (12, 8)), cos, sin)
    scores = q_rot @ k_rot.T                             # [i, j]
    image = axes[1].imshow(scores, cmap="RdBu_r")
    axes[1].set_xlabel("k 的位置 j")
    axes[1].set_ylabel("q 的位置 i")
    axes[1].set_title("Rotary(head_dim=8)：(Rᵢq)·(Rⱼk) = q·R₍ⱼ₋ᵢ₎k\n"
                      "同一条斜线（同一位置差 j−i）颜色相同", fontsize=9)
    fig.colorbar(image, ax=axes[1], shrink=0.8, label="分数 score")
    del rotary
    fig.suptitle("RoPE 旋转位置编码 (t05_rope.Rotary)：点积里只剩相对位置", fontsize=10)
    return fig


# -- 07 / 08: activations and the SwiGLU gate -----------------------------------------------
def activations():
    """ReLU, GELU and SiLU on [-4, 4]."""
    plt = _plt()
    x = np.linspace(-4, 4, 401)
    fig, ax = plt.subplots(figsize=(7, 4.4))
    ax.plot(x, relu_forward(x)[0], label="ReLU  relu_forward")
    ax.plot(x, gelu_forward(x)[0], label="GELU  gelu_forward")
    ax.plot(x, silu_forward(x)[0], label="SiLU  silu_forward（= x·sigmoid(x)）")
    ax.axhline(0, color="0.8", lw=0.8)
    ax.axvline(0, color="0.8", lw=0.8)
    ax.set_xlabel("输入 x")
    ax.set_ylabel("激活函数 activation(x)")
    ax.set_title("FFN 中间的非线性：激活函数 activation（t06_activations）", fontsize=10)
    ax.legend()
    return fig


def swiglu_gate():
    """SwiGLU's gate SiLU(g) * u, and the article's 3 x 0.2 = 0.6."""
    plt = _plt()
    g = np.linspace(-4, 4, 201)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    for u in (3.0, 1.0, -1.0):
        axes[0].plot(g, swiglu_gate_forward(g, np.full_like(g, u))[0], label=f"待传递量 u = {u:g}")
    axes[0].set_xlabel("门分支 g（gate 投影的输出）")
    axes[0].set_ylabel("SiLU(g) × u")
    axes[0].set_title("门控 swiglu_gate_forward(g, u) = SiLU(g)·u", fontsize=9)
    axes[0].legend(fontsize=8)
    labels = ["待传递量 3", "门系数 0.2", "乘积 0.6"]
    bars = axes[1].bar(labels, [3.0, 0.2, 3.0 * 0.2], color=["tab:blue", "tab:gray", "tab:green"])
    axes[1].bar_label(bars, fmt="%.1f")
    axes[1].set_title("文章的两个数：3 × 0.2 = 0.6（门不一定是 0 或 1）", fontsize=9)
    fig.suptitle("SwiGLU（t07_ffn.SwiGLU）：一条分支经 SiLU，与另一条逐元素相乘", fontsize=10)
    return fig


# -- 09 norms --------------------------------------------------------------------------------
def norms():
    """LayerNorm and RMSNorm of the article's [1, 3], and of points on a line."""
    plt = _plt()
    x = np.array([[[1.0, 3.0]]])
    ln, _ = layernorm_forward(x, np.ones(2), np.zeros(2), eps=0.0)
    rms, _ = rmsnorm_forward(x, np.ones(2), eps=0.0)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    ax = axes[0]
    for vec, color, text in ((x[0, 0], "black", "输入 x = [1, 3]"),
                             (ln[0, 0], "tab:blue", f"LayerNorm → [{ln[0,0,0]:.0f}, {ln[0,0,1]:.0f}]"),
                             (rms[0, 0], "tab:orange",
                              f"RMSNorm → [{rms[0,0,0]:.3f}, {rms[0,0,1]:.3f}]")):
        ax.annotate("", xy=vec, xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": color, "lw": 2})
        ax.text(vec[0] + 0.1, vec[1], text, color=color, fontsize=9)
    ax.set_xlim(-1.6, 3.6)
    ax.set_ylim(-0.5, 3.5)
    ax.set_aspect("equal")
    ax.axhline(0, color="0.85")
    ax.axvline(0, color="0.85")
    ax.set_title("[1,3]：LayerNorm 减均值再除标准差，RMSNorm 只除均方根 √5", fontsize=9)
    # many inputs [t, 2t + 1]: what each norm makes of them
    t = np.linspace(-2, 1, 13)
    points = np.stack([t, 2 * t + 1], axis=-1)[None]     # [1, 13, 2]
    ln_pts, _ = layernorm_forward(points, np.ones(2), np.zeros(2), eps=1e-5)
    rms_pts, _ = rmsnorm_forward(points, np.ones(2), eps=1e-6)
    axes[1].scatter(points[0, :, 0], points[0, :, 1], s=14, color="black", label="输入")
    axes[1].scatter(ln_pts[0, :, 0], ln_pts[0, :, 1], s=30, color="tab:blue",
                    label="LayerNorm：只剩 [-1,1] 或 [1,-1]")
    axes[1].scatter(rms_pts[0, :, 0], rms_pts[0, :, 1], s=14, color="tab:orange",
                    label="RMSNorm：落在半径 √2 的圆上")
    circle = np.linspace(0, 2 * np.pi, 200)
    axes[1].plot(math.sqrt(2) * np.cos(circle), math.sqrt(2) * np.sin(circle), color="tab:orange",
                 lw=0.5)
    axes[1].set_aspect("equal")
    axes[1].set_xlim(-3.2, 3.2)
    axes[1].set_ylim(-3.2, 3.2)
    axes[1].legend(fontsize=8, loc="lower right")
    axes[1].set_title("两维输入 [t, 2t+1]（γ=1, β=0）", fontsize=9)
    fig.suptitle("归一化 Norm：layernorm_forward 与 rmsnorm_forward（t08_norm）", fontsize=10)
    return fig


# -- 10 logits to probabilities -------------------------------------------------------------
def logits_to_probabilities():
    """The article's vocabulary 商家 / 买家 / 未知 with logits [2, 1, 0]."""
    plt = _plt()
    words = ["商家", "买家", "未知"]
    logits = np.array([2.0, 1.0, 0.0])
    probs = softmax(logits)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    bars = axes[0].bar(words, logits, color="tab:gray")
    axes[0].bar_label(bars, fmt="%.0f")
    axes[0].set_title("logits（词表投影 LM head 的输出）", fontsize=10)
    bars = axes[1].bar(words, probs, color="tab:blue")
    axes[1].bar_label(bars, fmt="%.3f")
    axes[1].set_ylim(0, 1)
    axes[1].set_title("概率 probabilities = softmax(logits)，和为 1", fontsize=10)
    fig.suptitle("下一个 Token 的分数：[2, 1, 0] → [0.665, 0.245, 0.090]（续写分布，不是法律概率）",
                 fontsize=10)
    return fig


# -- 12 / 14 / 15: the cache, GQA and the cost of length -------------------------------------
def kv_memory():
    """KV-cache bytes against length for 32, 8 and 1 key/value heads (float16, one layer)."""
    plt = _plt()
    lengths = np.array([1024, 2048, 4096, 8192, 16384, 32768])
    head_dim, bytes_per = 128, 2
    fig, ax = plt.subplots(figsize=(8, 4.6))
    for kv_heads, text in ((32, "多头 MHA：H_kv = 32"), (8, "GQA：H_kv = 8（四个 Query 头一组）"),
                           (1, "MQA：H_kv = 1")):
        cache = 2 * kv_heads * head_dim * bytes_per * lengths / 2 ** 20       # K and V, MiB
        ax.plot(lengths, cache, "o-", label=text)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("上下文长度 N（已缓存的位置）")
    ax.set_ylabel("一层的 KV Cache（MiB，float16）")
    ax.set_title("KV 缓存 KVCache：2 × H_kv × D × N × 2 字节，D = 128，H = 32 个 Query 头\n"
                 "随长度线性增长；H_kv 从 32 减到 8，缓存降到四分之一", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def kv_cache_work():
    """Positions projected per generated token, without and with a KV cache."""
    plt = _plt()
    prompt, new = 8, 8
    steps = np.arange(1, new + 1)
    plain = prompt + steps - 1                           # the whole sequence again at each step
    cached = np.where(steps == 1, prompt, 1)             # the prompt once, then one new position
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.4
    ax.bar(steps - width / 2, plain, width, label="不用缓存：每步重算整段")
    ax.bar(steps + width / 2, cached, width, label="KV Cache：只算新位置，旧 K/V 读缓存")
    ax.set_xlabel("生成第几个新 Token")
    ax.set_ylabel("这一步要投影的位置数")
    ax.set_title(f"KV Cache 为什么能加速生成：提示 {prompt} 个 Token，再生成 {new} 个\n"
                 f"合计 {plain.sum()} 对 {cached.sum()} 个位置（每层）", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def attention_cost():
    """Entries of the attention weight table against length: N^2, and a sliding window's N w."""
    plt = _plt()
    lengths = np.array([512, 1024, 2048, 4096, 8192, 16384, 32768])
    window = 1024
    fig, ax = plt.subplots(figsize=(8, 4.4))
    ax.plot(lengths, lengths.astype(float) ** 2, "o-", label="标准 Attention：N × N 个分数")
    ax.plot(lengths, lengths * np.minimum(lengths, window).astype(float), "s-",
            label=f"滑动窗口 window={window}：约 N × {window}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("序列长度 N")
    ax.set_ylabel("每个头要算的分数个数")
    ax.set_title("上下文越长越贵：长度翻倍，注意力表变成四倍", fontsize=10)
    ax.legend(fontsize=8)
    return fig


# -- 13 MoE routing --------------------------------------------------------------------------
def moe_routing():
    """How many of 64 tokens each of 8 experts serves with top-2 routing."""
    plt = _plt()
    rng = np.random.default_rng(0)
    moe = MoE(d=8, n_experts=8, top_k=2, hidden=16, expert="gelu", rng=rng, dtype=np.float64)
    x = rng.normal(size=(1, 64, 8))
    _, cache = moe.forward(x)
    first = np.bincount(cache.chosen[:, 0], minlength=8)
    second = np.bincount(cache.chosen[:, 1], minlength=8)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    experts = np.arange(8)
    ax.bar(experts, first, label="第一选择")
    ax.bar(experts, second, bottom=first, label="第二选择")
    ax.axhline(64 * 2 / 8, color="black", ls="--", lw=1, label="负载均匀时：16")
    ax.set_xticks(experts)
    ax.set_xlabel("专家 expert e")
    ax.set_ylabel("被路由到的 Token 数")
    ax.set_title("MoE 路由器 router：64 个 Token，每个选 8 个专家中的 2 个 (MoE(top_k=2))\n"
                 "随机初始化的路由器已经分得不均匀（负载不均）", fontsize=9)
    ax.legend(fontsize=8)
    return fig


# -- 16 three backbones ----------------------------------------------------------------------
def backbones():
    """Who may read whom in encoder-only, decoder-only and encoder-decoder models."""
    plt = _plt()
    n, m = 5, 6
    fig, axes = plt.subplots(1, 4, figsize=(17, 5.4))
    _mask_table(axes[0], np.ones((n, n), bool), "Encoder-only（Encoder）\n双向读取：全部可见")
    _mask_table(axes[1], causal_mask(n), "Decoder-only（DecoderLM）\n因果读取：只看自己和之前")
    _mask_table(axes[2], causal_mask(n), "Encoder-decoder：解码器自注意力\n因果")
    _mask_table(axes[3], np.ones((n, m), bool), "Encoder-decoder：交叉注意力 CrossAttention\n"
                "Q 来自中文侧，K/V 来自英文编码", xlabel="源语言位置（编码器输出）",
                ylabel="目标语言位置（解码器）")
    fig.suptitle("三种骨干结构的可见范围（“读”= 可以读取，“×”= 被掩码遮住）", fontsize=10)
    return fig


# -- 17 training ------------------------------------------------------------------------------
def first_training_steps():
    """The worked example's loss over its first AdamW steps, against ln V."""
    plt = _plt()
    from .cli.worked_examples import find_examples_dir, list_examples, select
    example = select(list_examples(find_examples_dir()), "first_training_steps")
    losses = example.load().run(lambda *args, **kwargs: None)["losses"]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    ax.plot(np.arange(1, len(losses) + 1), losses, "o-", ms=3, label="交叉熵 cross_entropy")
    ax.axhline(math.log(50), color="black", ls="--", lw=1, label="ln 50 ≈ 3.91（随机猜 50 个词）")
    ax.set_yscale("log")
    ax.set_xlabel("AdamW 步数")
    ax.set_ylabel("损失 loss（对数刻度）")
    ax.set_title("训练的开头：预测下一个 Token，损失从 ln V 附近下降", fontsize=10)
    ax.legend(fontsize=8)
    return fig


# -- 20 scaling ------------------------------------------------------------------------------
def score_variance():
    """Standard deviation of q.k and of q.k / sqrt(D) against D, for unit-variance q and k."""
    plt = _plt()
    rng = np.random.default_rng(0)
    dims = np.array([2, 4, 8, 16, 32, 64, 128, 256, 512])
    raw, scaled = [], []
    for D in dims:
        q, k = rng.normal(size=(4000, D)), rng.normal(size=(4000, D))
        dots = (q * k).sum(axis=-1)
        raw.append(dots.std())
        scaled.append((dots / math.sqrt(D)).std())
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    axes[0].plot(dims, raw, "o-", label="未缩放 q·k：标准差 ≈ √D")
    axes[0].plot(dims, scaled, "s-", label="缩放后 q·k / √D：标准差 ≈ 1")
    axes[0].plot(dims, np.sqrt(dims), color="0.6", ls="--", lw=1, label="√D")
    axes[0].set_xscale("log", base=2)
    axes[0].set_yscale("log", base=2)
    axes[0].set_xlabel("Key 维度 D（dₖ）")
    axes[0].set_ylabel("分数的标准差（4000 对随机 q, k）")
    axes[0].set_title("为什么除以 √dₖ：分量方差为 1 时，点积方差等于 D", fontsize=9)
    axes[0].legend(fontsize=8)
    gaps = np.linspace(0, 20, 201)
    top = [softmax(np.array([g, 0.0]))[0] for g in gaps]
    axes[1].plot(gaps, top)
    for g in (0.707, 5.0, 20.0):
        axes[1].plot([g], [softmax(np.array([g, 0.0]))[0]], "o", color="tab:red")
        axes[1].annotate(f"差 {g:g}", (g, softmax(np.array([g, 0.0]))[0]), textcoords="offset points",
                         xytext=(4, -14), fontsize=8)
    axes[1].set_xlabel("两个分数之差")
    axes[1].set_ylabel("较大者的 softmax 权重")
    axes[1].set_title("分数差太大，softmax 变成接近 1 和 0（梯度变小）", fontsize=9)
    fig.suptitle("缩放点积 scaled dot-product：attention_forward 的 scale = 1/√D", fontsize=10)
    return fig


# -- 26 the residual stream's scale ----------------------------------------------------------
def residual_scale():
    """RMS of the residual stream against depth: no norms, Pre-Norm, Post-Norm."""
    plt = _plt()
    rng = np.random.default_rng(0)
    d, depth = 64, 32
    layers = [rng.normal(size=(d, d)) * (1.2 / math.sqrt(d)) for _ in range(depth)]
    x0 = rng.normal(size=(16, d))
    ones, zeros = np.ones(d), np.zeros(d)

    def sublayer(x, w):
        return np.tanh(x @ w) * 2.0 + x @ w                 # a non-linear map that enlarges

    results = {}
    for name in ("不加 Norm：x + f(x)", "Pre-Norm：x + f(Norm(x))", "Post-Norm：Norm(x + f(x))"):
        x, rms = x0.copy(), []
        for w in layers:
            if name.startswith("不加"):
                x = x + sublayer(x, w)
            elif name.startswith("Pre"):
                x = x + sublayer(layernorm_forward(x[None], ones, zeros)[0][0], w)
            else:
                x = layernorm_forward((x + sublayer(x, w))[None], ones, zeros)[0][0]
            rms.append(float(np.sqrt((x ** 2).mean())))
        results[name] = rms
    fig, ax = plt.subplots(figsize=(8, 4.6))
    for name, rms in results.items():
        ax.plot(np.arange(1, depth + 1), rms, "o-", ms=3, label=name)
    ax.set_yscale("log")
    ax.set_xlabel("层数 layer")
    ax.set_ylabel("残差流的均方根 RMS（对数刻度）")
    ax.set_title("残差流 residual stream 的尺度：不加归一化时逐层变大，\n"
                 "Pre-Norm 让每层读到的输入保持同一尺度，Post-Norm 把输出拉回 1", fontsize=9)
    ax.legend(fontsize=8)
    return fig


# -- the tour's tiny decoder ----------------------------------------------------------------
def _tour_model(n_heads=2, causal=True, seed=7):
    from .cli.tour import TUTORIAL_IDS
    from .t10_model import DecoderConfig, DecoderLM
    model = DecoderLM(DecoderConfig(n_heads=n_heads, causal=causal), np.random.default_rng(seed))
    logits, cache = model.forward(TUTORIAL_IDS)
    return TUTORIAL_IDS, logits, cache


def tour_heads(n_heads=2, causal=True, seed=7):
    """The tiny decoder's attention, one map per head (not averaged)."""
    plt = _plt()
    ids, _, cache = _tour_model(n_heads, causal, seed)
    weights = cache.attention(0)[0]                      # [H, N, N]
    labels = [str(i) for i in ids[0]]
    fig, axes = plt.subplots(1, n_heads, figsize=(5 * n_heads, 4.6), squeeze=False)
    for h, ax in enumerate(axes[0]):
        _table(ax, weights[h], f"头 head {h}", row_labels=labels, col_labels=labels, vmin=0, vmax=1,
               fmt="{:.2f}", xlabel="键 key（Token ID）", ylabel="查询 query（Token ID）")
        for text in ax.texts:
            text.set_fontsize(6)
    mask = "因果掩码 causal" if causal else "不加掩码 no mask"
    fig.suptitle(f"npformer tour：教学小模型 DecoderLM（V=50, d=8, H={n_heads}，随机权重 seed {seed}），"
                 f"{mask}\n第一行只能读第一个位置，最后一行可读全部八个", fontsize=10)
    return fig


def tour_next_token(n_heads=2, causal=True, seed=7):
    """The last position's 50 logits and their probabilities."""
    plt = _plt()
    _, logits, _ = _tour_model(n_heads, causal, seed)
    last = logits[0, -1].astype(np.float64)
    probs = softmax(last)
    fig, axes = plt.subplots(2, 1, figsize=(10, 5.4), sharex=True)
    axes[0].bar(np.arange(len(last)), last, color="tab:gray")
    axes[0].set_ylabel("logits")
    axes[1].bar(np.arange(len(probs)), probs, color="tab:blue")
    top = np.argsort(probs)[::-1][:3]
    axes[1].bar(top, probs[top], color="tab:red", label="前三名 top-3：" +
                "，".join(f"id {i} p={probs[i]:.3f}" for i in top))
    axes[1].legend(fontsize=8, loc="upper right")
    axes[1].set_ylim(0, probs.max() * 1.35)
    axes[1].set_ylabel("概率 softmax")
    axes[1].set_xlabel("词表 Token ID（V = 50）")
    fig.suptitle("最后一个位置的 logits → 概率（随机模型：候选 ID 没有业务含义）", fontsize=10)
    return fig


# -- which pictures each worked example draws -----------------------------------------------
PICTURES = {
    2: [("02_attention_by_hand.png", attention_by_hand)],
    3: [("03_score_table.png", score_table), ("03_masks.png", masks)],
    4: [("04_heads.png", heads)],
    5: [("05_sinusoid.png", sinusoid), ("05_rope.png", rope)],
    7: [("07_activations.png", activations)],
    8: [("08_swiglu_gate.png", swiglu_gate)],
    9: [("09_norms.png", norms)],
    10: [("10_logits_to_probabilities.png", logits_to_probabilities)],
    11: [("11_heads.png", tour_heads)],
    12: [("12_kv_cache_gqa_memory.png", kv_memory)],
    13: [("13_moe_routing.png", moe_routing)],
    14: [("14_kv_cache_work.png", kv_cache_work)],
    15: [("15_attention_cost.png", attention_cost)],
    16: [("16_backbones.png", backbones)],
    17: [("17_first_training_steps.png", first_training_steps)],
    20: [("20_score_variance.png", score_variance)],
    26: [("26_residual_scale.png", residual_scale)],
}
TOUR_PICTURES = [("tour_heads.png", tour_heads), ("tour_next_token.png", tour_next_token)]


def save(fig, path, dpi=110):
    """Write ``fig`` to the PNG ``path`` (through a temporary file) and close it; returns path."""
    plt = _plt()
    temporary = f"{path}.part"
    fig.savefig(temporary, dpi=dpi, format="png", bbox_inches="tight")
    plt.close(fig)
    os.replace(temporary, path)
    return path


def draw(number, directory):
    """Write the pictures of worked example ``number`` into ``directory``; returns the paths
    (empty if that example has none)."""
    require_matplotlib()
    os.makedirs(directory, exist_ok=True)
    return [save(make(), os.path.join(directory, name)) for name, make in PICTURES.get(number, [])]


def draw_tour(directory, n_heads=2, causal=True, seed=7):
    """Write the tour's pictures into ``directory``; returns the paths."""
    require_matplotlib()
    os.makedirs(directory, exist_ok=True)
    return [save(make(n_heads, causal, seed), os.path.join(directory, name))
            for name, make in TOUR_PICTURES]
