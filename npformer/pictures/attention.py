"""Pictures of attention: the hand-computed example, the score table and its softmax, the
masks, per-head maps, the three backbones, the scaling by sqrt(D), and the tour's decoder."""
from __future__ import annotations

import math

import numpy as np

from ..t03_softmax import softmax
from ..t04_attention import MultiHeadAttention, causal_mask, padding_mask
from .style import _mask_table, _plt, _table


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
                "查询 Q 取自解码器（中文），K/V 取自编码器（英文）", xlabel="源语言位置（编码器输出）",
                ylabel="目标语言位置（解码器）")
    fig.suptitle("三种骨干结构的可见范围（“读”= 可以读取，“×”= 被掩码遮住）", fontsize=10)
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


# -- the tour's tiny decoder ----------------------------------------------------------------
TUTORIAL_IDS = np.array([[3, 8, 12, 5, 17, 42, 23, 6]])     # the article's ids, as in npformer tour


def _tour_model(n_heads=2, causal=True, seed=7):
    from ..t10_model import DecoderConfig, DecoderLM
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
