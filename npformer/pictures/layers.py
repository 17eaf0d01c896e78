"""Pictures of positions, the FFN and its gate, norms and the residual stream, logits, the
KV cache and GQA, the cost of length, MoE routing and the first training steps."""
from __future__ import annotations

import math

import numpy as np

from ..t01_embedding import sinusoid_table
from ..t03_softmax import softmax
from ..t05_rope import Rotary, rotate
from ..t06_activations import gelu_forward, relu_forward, silu_forward
from ..t07_ffn import swiglu_gate_forward
from ..t08_norm import layernorm_forward, rmsnorm_forward
from ..t14_moe import MoE
from .style import _plt, label_axes, results


# -- 05 positions: the sinusoid table and a RoPE rotation ----------------------------------
def sinusoid():
    """The sinusoid position table PE[p, i] for 64 positions and width 32."""
    plt = _plt()
    table = sinusoid_table(64, 32)                       # [max_len, d]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [1.3, 1]})
    image = axes[0].imshow(table.T, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1)
    axes[0].set_xlabel("位置 position p")
    axes[0].set_ylabel("分量 i（维度）")
    axes[0].set_title("正弦位置表 sinusoid_table(64, 32)：上面几行（i 小）随位置变得快，下面几行变得慢",
                      fontsize=9)
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
    label_axes(ax, "上下文长度 N（已缓存的位置）", "一层的 KV Cache（MiB，float16）",
               "KV 缓存 KVCache：2 × H_kv × D × N × 2 字节，D = 128，H = 32 个 Query 头\n"
               "随长度线性增长；H_kv 从 32 减到 8，缓存降到四分之一", log="xy")
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
    label_axes(ax, "生成第几个新 Token", "这一步要投影的位置数",
               f"KV Cache 为什么能加速生成：提示 {prompt} 个 Token，再生成 {new} 个\n"
               f"合计 {plain.sum()} 对 {cached.sum()} 个位置（每层）")
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
    label_axes(ax, "序列长度 N", "每个头要算的分数个数", "上下文越长越贵：长度翻倍，注意力表变成四倍",
               log="xy", fontsize=10)
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
    label_axes(ax, "专家 expert e", "被路由到的 Token 数",
               "MoE 路由器 router：64 个 Token，每个选 8 个专家中的 2 个 (MoE(top_k=2))\n"
               "随机初始化的路由器已经分得不均匀（负载不均）")
    return fig


# -- 17 training ------------------------------------------------------------------------------
def first_training_steps():
    """The worked example's loss over its first AdamW steps, against ln V."""
    plt = _plt()
    losses = results("first_training_steps")["losses"]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    ax.plot(np.arange(1, len(losses) + 1), losses, "o-", ms=3, label="交叉熵 cross_entropy")
    ax.axhline(math.log(50), color="black", ls="--", lw=1, label="ln 50 ≈ 3.91（随机猜 50 个词）")
    label_axes(ax, "AdamW 步数", "损失 loss（对数刻度）", "训练的开头：预测下一个 Token，损失从 ln V 附近下降",
               log="y", base=10, fontsize=10)
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
    label_axes(ax, "层数 layer", "残差流的均方根 RMS（对数刻度）",
               "残差流 residual stream 的尺度：不加归一化时逐层变大，\n"
               "Pre-Norm 让每层读到的输入保持同一尺度，Post-Norm 把输出拉回 1", log="y", base=10)
    return fig
