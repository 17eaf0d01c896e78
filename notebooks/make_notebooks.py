"""Write the two notebooks (one per article) and run them once, so they are stored with
their outputs: ``python notebooks/make_notebooks.py`` (needs nbformat, nbclient, ipykernel
and the plot extra). tests/project/test_notebooks.py runs the stored notebooks again from scratch."""
from __future__ import annotations

import pathlib
import time

import nbformat
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parent

SETUP = '''\
# 准备：找到 npformer（pip install -e . 之后直接可用；否则用这个笔记本上一级的源码）
import pathlib, sys, tempfile
if not (pathlib.Path.cwd() / "npformer").is_dir() and (pathlib.Path.cwd().parent / "npformer").is_dir():
    sys.path.insert(0, str(pathlib.Path.cwd().parent))
import numpy as np
import npformer
from npformer import pictures
from IPython.display import Image, display

PICTURE_DIR = pathlib.Path(tempfile.mkdtemp())

def show(draw, *args):
    """画一张图（npformer.pictures 里的函数），存成 PNG 再显示。"""
    path = pictures.save(draw(*args), str(PICTURE_DIR / (draw.__name__ + ".png")), dpi=80)
    display(Image(filename=path))

def attend(q, k, v):
    """attention_forward 要 [B, H, N, D]；这里给一个批次、一个头：q [N, D], k [M, D], v [M, Dv]。"""
    from npformer.t04_attention import attention_forward
    out, cache = attention_forward(q[None, None], k[None, None], v[None, None])
    return out[0, 0], cache

def close(x, expected, tol=5e-4):
    """文章印到小数点后三位：|x - 文章的数| < 5e-4。"""
    assert np.allclose(x, expected, atol=tol, rtol=0), (x, expected)
    return np.round(np.asarray(x, dtype=float), 3)
'''


def md(text):
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text):
    return nbformat.v4.new_code_cell(text.strip())


def change(text):
    """A "改一改，看看" cell: a number to change and what moves."""
    return code("# 改一改，看看\n" + text.strip())


MAIN = [
    md("""
# 主文：《Transformer 怎样处理一句话：从 Attention 到完整计算过程》

这个笔记本按文章的小节顺序演示，小节标题照录文章。每一节先用 npformer 重算文章里的数，
并用 `assert` 核对（文章给出的数保留三位小数，所以核对时允许 5e-4 的误差）；再画出这一节的图；
最后是一个“改一改，看看”单元：换一个数重新运行，看看什么变了。

文章拿来当例子的句子，这里原样引用，引号里的文字照抄文章：“商品有质量问题，运费谁承担？”
“商家 承担 运费”“客户退款给商家”“商家退款给客户”。

另有一句是我们的例句，和文章的第一句对照：“无理由退货，运费谁承担？”

运行方式：在仓库根目录安装画图用的 plot 附加包和 Jupyter，
`pip install -e '.[plot]' nbclient nbformat ipykernel jupyter`，然后 `jupyter notebook notebooks/`。
只装 `pip install -e .` 的话，第一张图就会因为缺少 matplotlib 而报错。
"""),
    code(SETUP),
    md("""
## 开篇（第一个小节标题之前）

“运费”在文章的句子和我们的例句里查到的 Embedding 完全相同：这时前文还没有起作用。代码：`t01_embedding.py` 的
`Embedding`；数字：`npformer examples 01`；图：`01_token_vectors.png`。
"""),
    code('''
from npformer import Embedding
sentences = ["商品有质量问题，运费谁承担？", "无理由退货，运费谁承担？"]   # 文章的例句、我们的例句
vocab = sorted(set("".join(sentences)))
ids = [np.array([[vocab.index(c) for c in s]]) for s in sentences]
table = Embedding(len(vocab), 8, rng=np.random.default_rng(0), dtype=np.float64)
rows = [table(i)[0] for i in ids]                       # 每句 [N, 8]
yun = [s.index("运") for s in sentences]
assert np.array_equal(rows[0][yun[0]], rows[1][yun[1]])  # 同一行，与上下文无关
print("两句中“运”的向量相同：", np.round(rows[0][yun[0]], 3))
show(pictures.token_vectors)        # npformer examples 01 的图：查表之后、经过一个 Block 之后
'''),
    md("""
## 先看位置之间为什么需要交换信息

X 的形状是 4 × 8：四个位置，每个位置八个数。只对每行做同样的变换，行与行之间没有交流；
对前文求平均，读取方式又不随问题改变。数字：`npformer examples 01`、`npformer examples 18`；图：`18_averaging_vs_attention.png`。
"""),
    code('''
rng = np.random.default_rng(0)
X = rng.normal(size=(4, 8))
assert X.shape == (4, 8)
W = rng.normal(size=(8, 8))
row_wise = X @ W                                        # 每行独立变换
X2 = X.copy(); X2[0] += 1.0                              # 只改第 0 个位置
assert np.allclose((X2 @ W)[1:], row_wise[1:])           # 其他位置完全没变
average = X.mean(axis=0)                                 # 平均：不管问什么，权重都是 1/4
print("逐行变换时，改第 0 行不影响其他行；平均的权重：", [0.25] * 4)
show(pictures.averaging_vs_attention)
'''),
    change('''
# 把 X2[0] += 1.0 改成 X2[2] += 5.0：逐行变换下，还是只有第 2 行会变。
X2 = X.copy(); X2[2] += 5.0
print(np.abs(X2 @ W - row_wise).max(axis=1).round(3))
'''),
    md("""
## Q、K、V 从同一个输入出来，为什么却不同

q = xWq，k = xWk，v = xWv：三组不同的矩阵。npformer 把三者放在一个融合投影里
（`t04_attention.py` 的 `MultiHeadAttention.qkv`，再由 `split_heads` 切开）。
数字：`npformer examples 19`；图：`19_separate_projections.png`。
"""),
    code('''
from npformer import MultiHeadAttention
attn = MultiHeadAttention(8, 1, rng=np.random.default_rng(1), dtype=np.float64)
qkv = attn.qkv(X[None])                                  # [1, 4, 3d]
Q, K, V = np.split(qkv[0], 3, axis=-1)                   # 各 [4, 8]
assert not np.allclose(Q, K) and not np.allclose(K, V)
# 直接用 X 做匹配：分数表 X X^T 一定对称，“i 读 j”和“j 读 i”被绑在一起
assert np.allclose(X @ X.T, (X @ X.T).T)
assert not np.allclose(Q @ K.T, (Q @ K.T).T)             # 独立投影后不再对称
print("Q K^T 第 0 行：", np.round((Q @ K.T)[0], 3))
show(pictures.separate_projections)
'''),
    change('''
# 让 Wq 与 Wk 相同（把 K 换成 Q），分数表又变回对称：
print(np.allclose(Q @ Q.T, (Q @ Q.T).T))
'''),
    md("""
## 手算一次 Attention，看看它输出了什么

q = [1, 0]，两个 Key [1, 0]、[0, 1]，两个 Value [2, 0]、[0, 4]。分数 [1, 0]，除以 √2 得
[0.707, 0]，softmax 得 [0.670, 0.330]，输出 [1.340, 1.321]。代码：`t04_attention.py` 的
`attention_forward`、`t03_softmax.py` 的 `softmax`；数字：`npformer examples 02`、`03`；
图：`02_attention_by_hand.png`、`03_score_table.png`。
"""),
    code('''
from npformer.t04_attention import attention_forward
from npformer.t03_softmax import softmax
q = np.array([[1.0, 0.0]])
k = np.array([[1.0, 0.0], [0.0, 1.0]])
v = np.array([[2.0, 0.0], [0.0, 4.0]])
scores = q @ k.T
print("分数", scores, "缩放后", close(scores / np.sqrt(2), [[0.707, 0.0]]))
close(np.exp(0.707), 2.028)
weights = softmax(scores / np.sqrt(2))
print("权重", close(weights, [[0.670, 0.330]]))
output, cache = attend(q, k, v)               # 默认 scale = 1/sqrt(D)
print("输出", close(output, [[1.340, 1.321]]))
# 第二个 Key 改成 [2, 0]：匹配更强，混合比例变了（Value 没变）
out2, _ = attend(q, np.array([[1.0, 0.0], [2.0, 0.0]]), v)
assert out2[0, 1] > output[0, 1]
show(pictures.attention_by_hand)
'''),
    code('''
# 四个位置同时算：Q K^T 是 4 x 4 的分数表，第 i 行第 j 列 = 位置 i 读位置 j
show(pictures.score_table)
'''),
    change('''
# 把 q 改成 [1, 1]：两个分数相同，权重变成 [0.5, 0.5]，输出是两个 Value 的平均。
out, _ = attend(np.array([[1.0, 1.0]]), k, v)
print(out.round(3))
'''),
    md("""
## 训练时答案已经在后面，模型怎样避免偷看

训练文本“商家 承担 运费”：因果掩码 M 把未来位置的分数设为负无穷，softmax 后权重为 0；
每个位置都能看自己。左侧补齐的位置由填充掩码遮住。代码：`t04_attention.py` 的
`causal_mask`、`padding_mask`、`combine_masks`；数字：`npformer examples 03`；图：`03_masks.png`。
"""),
    code('''
from npformer.t04_attention import causal_mask, padding_mask
words = ["商家", "承担", "运费"]
table = causal_mask(3)
for i, w in enumerate(words):
    print(f"{w} 可以读：", [words[j] for j in range(3) if table[i, j]])
assert table.sum(axis=1).tolist() == [1, 2, 3]           # 第 i 个位置读 i 个位置（含自己）
S = np.random.default_rng(0).normal(size=(3, 3))
W_causal = softmax(S, mask=table)
assert np.all(W_causal[np.triu_indices(3, 1)] == 0)      # 未来的权重恰好为 0
assert np.allclose(W_causal.sum(axis=1), 1)
pad = padding_mask(lengths=np.array([2]), n=4, side="left")[0, 0, 0]
print("左补两个空位后，可读的键：", pad.tolist())
assert pad.tolist() == [False, False, True, True]
show(pictures.masks)
'''),
    change('''
# 删掉因果掩码：第一行也能读到后面的位置（程序照样能算，但不再符合自回归训练）。
print(softmax(S).round(3)[0], "对比", W_causal.round(3)[0])
'''),
    md("""
## 多头不是多算几遍同样的东西

d = 8、两个头，每头 D = 4：X [B, N, 8] → Q [B, 2, N, 4]，每个头一张 [N, N] 权重表，拼回
[B, N, 8] 再乘 Wo。代码：`MultiHeadAttention`（`split_heads`、`out`）；数字：`npformer examples 04`、`23`；
图：`04_heads.png`、`23_one_head_versus_two.png`。
"""),
    code('''
from npformer.t04_attention import MultiHeadAttention
mha = MultiHeadAttention(8, 2, rng=np.random.default_rng(7), dtype=np.float64)
Xb = np.random.default_rng(7).normal(size=(1, 5, 8))     # [B, N, 8]
q_heads, k_heads, v_heads = mha.split_heads(mha.qkv(Xb))
print("Q 拆头后：", q_heads.shape)
assert q_heads.shape == (1, 2, 5, 4) and mha.head_dim == 4
y, cache = mha.forward(Xb, mask=causal_mask(5))
assert y.shape == (1, 5, 8) and cache.weights.shape == (1, 2, 5, 5)
assert not np.allclose(cache.weights[0, 0], cache.weights[0, 1])   # 两个头读法不同
show(pictures.heads)
show(pictures.one_head_versus_two)
'''),
    change('''
# 改成 4 个头（width 仍是 8）：每头维度变成 2，权重表变成 4 张，输出形状不变。
mha4 = MultiHeadAttention(8, 4, rng=np.random.default_rng(7), dtype=np.float64)
y4, c4 = mha4.forward(Xb, mask=causal_mask(5))
print(mha4.head_dim, c4.weights.shape, y4.shape)
'''),
    md("""
## 位置编码怎样让顺序进入匹配

文章的例子“客户退款给商家”和“商家退款给客户”用的字完全一样，付款方向却相反。加位置向量：xᵢ = token + position；
RoPE 则旋转 Q、K 的分量对：q、k 都是 [1, 0]，角度差 60° 时点积为 0.5，而且只和位置差有关。
代码：`t01_embedding.py` 的 `LearnedPositions`、`sinusoid_table`，`t05_rope.py` 的 `Rotary`、`rotate`；
数字：`npformer examples 05`、`06`、`21`；图：`05_sinusoid.png`、`05_rope.png`、`06_word_order.png`、
`21_rope_past_trained_length.png`。
"""),
    code('''
from npformer.t05_rope import Rotary, rotate
a, b = "客户退款给商家", "商家退款给客户"
assert sorted(a) == sorted(b) and a != b                 # 同样的字，不同的顺序

def turn(vec, degrees):
    t = np.radians(degrees)
    return rotate(np.array(vec, float), np.array([np.cos(t)]), np.array([np.sin(t)]), layout="interleaved")

print("同角度：", close(turn([1, 0], 40) @ turn([1, 0], 40), 1.0))
print("差 60°：", close(turn([1, 0], 0) @ turn([1, 0], 60), 0.5))
close(turn([1, 0], 100) @ turn([1, 0], 160), 0.5)        # 绝对角度变了，差不变，点积不变
# 8 维 RoPE：(R_i q)·(R_j k) = q·R_(j-i) k
rope = Rotary(head_dim=8)
rq, rk = np.random.default_rng(3).normal(size=(2, 8))
def at(x, p):
    ang = rope.angles(np.array([p]))
    return rotate(x[None], np.cos(ang), np.sin(ang))[0]
assert np.isclose(at(rq, 0) @ at(rk, 3), at(rq, 5) @ at(rk, 8))
assert np.isclose(at(rq, 20) @ at(rk, 23), rq @ at(rk, 3))
show(pictures.sinusoid)
show(pictures.rope)
show(pictures.word_order)
show(pictures.rotary_past_trained_length)
'''),
    change('''
# 把位置差从 3 改成 4：分数变了；但 (0,4) 与 (10,14) 仍然相同。
print(at(rq, 0) @ at(rk, 4), at(rq, 10) @ at(rk, 14), at(rq, 0) @ at(rk, 3))
'''),
    md("""
## Attention 后面为什么还需要 FFN、残差和归一化

文章的 FFN：x = [1, -1]，W₁ = [[1,0,1],[0,1,-1]] 得 [1,-1,2]，ReLU 得 [1,0,2]，乘 W₂ 得 [1,2]。
SwiGLU 门：3 × 0.2 = 0.6。残差：[2,1] + [0.1,-0.2] = [2.1,0.8]。LayerNorm([1,3]) = [-1,1]，
RMSNorm([1,3]) ≈ [0.447,1.342]。代码：`t07_ffn.py` 的 `FFN`、`SwiGLU`，`t06_activations.py`，
`t08_norm.py` 的 `layernorm_forward`、`rmsnorm_forward`，`t09_block.py` 的 `PreNormBlock`；数字：
`npformer examples 07`、`08`、`09`、`26`；图：`07_activations.png`、`08_swiglu_gate.png`、
`09_norms.png`、`26_residual_scale.png`，以及 `22_deep_stack_without_residuals.png`、
`25_depth_and_what_it_can_express.png`（`npformer examples 22`、`25`）。
"""),
    code('''
from npformer.t06_activations import relu_forward, silu_forward
from npformer.t07_ffn import swiglu_gate_forward
from npformer.t08_norm import layernorm_forward, rmsnorm_forward
x = np.array([1.0, -1.0])
W1 = np.array([[1.0, 0, 1], [0, 1, -1]])
W2 = np.array([[1.0, 0], [0, 1], [0, 1]])
widened = x @ W1
activated, _ = relu_forward(widened)
assert widened.tolist() == [1, -1, 2] and activated.tolist() == [1, 0, 2]
assert (activated @ W2).tolist() == [1, 2]
assert np.allclose(x @ W1 @ W2, x @ (W1 @ W2))           # 没有激活：两层线性合成一层
# 门：找 g 使 SiLU(g) = 0.2，再乘待传递量 3
lo, hi = 0.0, 2.0
for _ in range(60):
    g = (lo + hi) / 2
    lo, hi = (g, hi) if silu_forward(np.array(g))[0] < 0.2 else (lo, g)
gated, _ = swiglu_gate_forward(np.array([g]), np.array([3.0]))
print("门控：", close(gated, [0.6]))
print("残差：", close(np.array([2, 1]) + np.array([0.1, -0.2]), [2.1, 0.8]))
ln, _ = layernorm_forward(np.array([[[1.0, 3.0]]]), np.ones(2), np.zeros(2), eps=0.0)
rms, _ = rmsnorm_forward(np.array([[[1.0, 3.0]]]), np.ones(2), eps=0.0)
print("LayerNorm：", close(ln[0, 0], [-1, 1]), " RMSNorm：", close(rms[0, 0], [0.447, 1.342]))
show(pictures.activations)
show(pictures.swiglu_gate)
show(pictures.norms)
show(pictures.residual_scale)
show(pictures.deep_stack_without_residuals)
show(pictures.depth_and_what_it_can_express)
'''),
    change('''
# 把输入换成 [1, 5]：LayerNorm 仍是 [-1, 1]（两维时只剩符号），RMSNorm 变了。
for f in (lambda t: layernorm_forward(t, np.ones(2), np.zeros(2), eps=0.0)[0],
          lambda t: rmsnorm_forward(t, np.ones(2), eps=0.0)[0]):
    print(f(np.array([[[1.0, 5.0]]]))[0, 0].round(3))
'''),
    md("""
## 多层之后，怎样变成下一个 Token 的分数

教学词表只有“商家”“买家”“未知”，logits [2, 1, 0]，softmax ≈ [0.665, 0.245, 0.090]。
代码：`t10_model.py` 的 `DecoderLM.forward`、`TiedHead`，`t03_softmax.py` 的 `softmax`，
`t11_loss.py` 的 `cross_entropy`；数字：`npformer examples 10`；图：`10_logits_to_probabilities.png`。
"""),
    code('''
vocab3 = ["商家", "买家", "未知"]
logits = np.array([2.0, 1.0, 0.0])
probs = softmax(logits)
print(dict(zip(vocab3, close(probs, [0.665, 0.245, 0.090]))))
assert np.isclose(probs.sum(), 1.0)
show(pictures.logits_to_probabilities)
'''),
    change('''
# 把 logits 全部加 10：概率不变（softmax 只看差）；乘 2：分布更尖。
print(softmax(logits + 10).round(3), softmax(2 * logits).round(3))
'''),
    md("""
## 把整条链写成一个小型前向程序

文章的 TinyDecoder：词表 50、宽度 8、两个头、最长 16，输入 ID 3 8 12 5 17 42 23 6。
npformer 的同一结构是 `DecoderLM(DecoderConfig(...))`（`t10_model.py`）；逐层走一遍：
`npformer tour`；数字：`npformer examples 11`；图：`npformer tour --plot DIR` 的 `tour_heads.png`、
`tour_next_token.png`。权重是 NumPy 的随机数，和文章的 PyTorch 随机数不同。
"""),
    code('''
from npformer import DecoderConfig, DecoderLM
ids = np.array([[3, 8, 12, 5, 17, 42, 23, 6]])
model = DecoderLM(DecoderConfig(), np.random.default_rng(7))
cfg = model.config
assert (cfg.vocab_size, cfg.d_model, cfg.n_heads) == (50, 8, 2)
logits, cache = model.forward(ids)
att = cache.attention(0)
print("各位置词表分数形状：", logits.shape, " 各头注意力形状：", att.shape)
assert logits.shape == (1, 8, 50) and att.shape == (1, 2, 8, 8)
assert np.allclose(att[0, :, 0, 1:], 0) and np.allclose(att[0, :, 0, 0], 1)   # 第一行只读第一个位置
assert (att[0, :, -1] > 0).all()                                          # 最后一行读八个
show(pictures.tour_heads)
show(pictures.tour_next_token)
'''),
    change('''
# 文章的练习：heads 从 2 改成 4（width 仍 8），每头维度变成 2，logits 形状不变。
m4 = DecoderLM(DecoderConfig(n_heads=4), np.random.default_rng(7))
l4, c4 = m4.forward(ids)
print(m4.config.head_dim, c4.attention(0).shape, l4.shape)
'''),
    md("""
## 再看 GQA 和 MoE：它们修改了哪一部分

32 个 Query 头配 8 个 KV 头：每四个 Query 头共享一组 K/V，缓存降到四分之一；八个一千万参数的专家，
每个 Token 选两个：专家共八千万，活跃两千万。最后是三种骨干结构的可见范围。代码：
`t04_attention.py` 的 `MultiHeadAttention(n_kv_heads=...)`、`t13_kv_cache.py` 的 `KVCache`、
`t14_moe.py` 的 `MoE`、`t15_encoder.py`、`t16_cross_attention.py`、`t17_seq2seq.py`；数字：
`npformer examples 12`、`13`、`16`；图：`12_kv_cache_gqa_memory.png`、`13_moe_routing.png`、`16_backbones.png`。
"""),
    code('''
H, H_kv, D, N = 32, 8, 128, 4096
kv_bytes = lambda heads: 2 * heads * D * N * 2               # K 和 V，float16
assert kv_bytes(H_kv) / kv_bytes(H) == 0.25
gqa = MultiHeadAttention(16, 8, n_kv_heads=2, rng=np.random.default_rng(0))
qg, kg, vg = gqa.split_heads(gqa.qkv(np.zeros((1, 3, 16), np.float32)))
assert qg.shape[1] == 8 and kg.shape[1] == 2                  # 每四个 Query 头共享一组 K/V
experts, per_expert, top_k = 8, 10_000_000, 2
assert experts * per_expert == 80_000_000 and top_k * per_expert == 20_000_000
print("GQA 缓存比例：", kv_bytes(H_kv) / kv_bytes(H), " 专家总量 / 活跃：", experts * per_expert, top_k * per_expert)
show(pictures.kv_memory)
show(pictures.moe_routing)
show(pictures.backbones)
'''),
    change('''
# 把 H_kv 改成 1（MQA）：缓存只剩 1/32。
print(kv_bytes(1) / kv_bytes(H))
'''),
]

OVERVIEW = [
    md("""
# 概览：《Transformer 到底在算什么？一文看懂 Attention》

这个笔记本按文章的十六个小节和总结依次演示，小节标题照录文章。每一节先用 npformer 重算
（用 `assert` 核对文章的数或性质），再看图，最后是一个“改一改，看看”单元。

文章拿来当例子的句子，这里原样引用，引号里的文字照抄文章：“狗追猫”“猫追狗”
“小明把杯子放到桌子上，因为它很稳。”

另有一句是我们的例句，只改了文章例句的最后一个词：“小明把杯子放到桌子上，因为它很满。”

运行方式：在仓库根目录安装画图用的 plot 附加包和 Jupyter，
`pip install -e '.[plot]' nbclient nbformat ipykernel jupyter`，然后 `jupyter notebook notebooks/`。
只装 `pip install -e .` 的话，第一张图就会因为缺少 matplotlib 而报错。
"""),
    code(SETUP),
    md("""
## 开篇（第一个小节标题之前）

Token ID 只是一串整数，数值本身不带意思；Transformer 先把编号换成向量，按上下文逐层改写，最后给出下一个
Token。`npformer tour` 把文章的小模型从 ID 走到下一个 Token 的概率，打印每一步的形状。
"""),
    md("""
## 一、一张图看懂 Transformer 的分工

Embedding + 位置 → Self-Attention → 残差与归一化 → MLP → 残差与归一化 → 重复 → Logits → Softmax。
图里的归一化放在残差相加之后，对应 `t09_block.py` 的 `PostNormBlock`；主文和 npformer 默认的模型
把归一化放在前面（`PreNormBlock`）。`npformer tour` 按这个顺序打印每一步的形状；模型：`t10_model.py`
的 `DecoderLM`。
"""),
    code('''
from npformer.cli.tour import walk, TUTORIAL_IDS
from npformer import DecoderConfig, DecoderLM
model = DecoderLM(DecoderConfig(), np.random.default_rng(7))
stages = []
walked, _ = walk(model, TUTORIAL_IDS, True, lambda text, names, a: stages.append((text, a.shape)))
for text, shape in stages:
    print(f"{text:42} {shape}")
logits, cache = model.forward(TUTORIAL_IDS)
assert np.allclose(walked, logits, atol=1e-5)            # 一步步走的结果就是模型本身
'''),
    change('''
# 去掉因果掩码再走一遍：形状全都一样，变的是权重。
walk(model, TUTORIAL_IDS, False, lambda text, names, a: None)[1][0, 0, 0].round(3)
'''),
    md("""
## 二、从 Token ID 到向量

隐藏维度 4,096：每个 Token 变成 4,096 个数（float32 时 16,384 字节）。代码：`t01_embedding.py` 的
`Embedding`；数字：`npformer examples 01`。
"""),
    code('''
from npformer import Embedding
emb = Embedding(100, 4096, rng=np.random.default_rng(0))
vec = emb(np.array([[7]]))
assert vec.shape == (1, 1, 4096) and vec.nbytes == 16384
print(vec.shape, vec.dtype, vec.nbytes, "字节")
show(pictures.token_vectors)
'''),
    change('''
# 换成 float64：每个 Token 的字节数翻倍。
print(emb.astype(np.float64)(np.array([[7]])).nbytes)
'''),
    md("""
## 三、为什么需要位置信息？

“狗追猫”和“猫追狗”：没有位置时，自注意力对排列是等变的——换了顺序，每个字得到的向量也只是跟着换了位置，
整句的“集合”完全一样。加上位置向量后就不同了。代码：`LearnedPositions`、`DecoderConfig.positions`；
数字：`npformer examples 06`；图：`05_sinusoid.png`、`06_word_order.png`。
"""),
    code('''
from npformer import MultiHeadAttention, LearnedPositions
s1, s2 = "狗追猫", "猫追狗"
vocab = sorted(set(s1 + s2))
tok = Embedding(len(vocab), 8, rng=np.random.default_rng(1), dtype=np.float64)
attn = MultiHeadAttention(8, 2, rng=np.random.default_rng(2), dtype=np.float64)
def encode(s, positions=None):
    x = tok(np.array([[vocab.index(c) for c in s]]))
    if positions is not None:
        x = x + positions(np.arange(len(s)))
    return attn(x)[0]
a, b = encode(s1), encode(s2)
perm = [s1.index(c) for c in s2]                           # 猫追狗 中每个字在 狗追猫 里的位置
assert np.allclose(b, a[perm])                             # 没有位置：只是换了行的顺序
print("无位置：两句的平均向量相同：", np.allclose(a.mean(0), b.mean(0)))
pos = LearnedPositions(8, 8, rng=np.random.default_rng(3), dtype=np.float64)
pa, pb = encode(s1, pos), encode(s2, pos)
assert not np.allclose(pa.mean(0), pb.mean(0))
print("加位置后：两句不再相同")
show(pictures.sinusoid)
show(pictures.word_order)
'''),
    change('''
# 换成你自己的句子（字相同、顺序不同），例如 "我借你钱" 和 "你借我钱"。
'''),
    md("""
## 四、Self-Attention 解决什么问题？

文章的例句“小明把杯子放到桌子上，因为它很稳。”：“它”所在的位置需要从前文读取信息。下面用随机权重的小模型看
“它”这一行的权重：可以读所有之前的字，但随机模型的权重没有语义。代码：`t04_attention.py`。
"""),
    code('''
from npformer.t04_attention import causal_mask
sentence = "小明把杯子放到桌子上，因为它很稳。"                 # 文章的例句
chars = list(sentence)
vocab = sorted(set(chars))
tok = Embedding(len(vocab), 8, rng=np.random.default_rng(0), dtype=np.float64)
x = tok(np.array([[vocab.index(c) for c in chars]]))
_, c = attn.forward(x, mask=causal_mask(len(chars)))
row = c.weights[0, :, chars.index("它")].mean(axis=0)    # “它”读取每个字的权重（两头平均）
assert np.isclose(row.sum(), 1) and np.all(row[chars.index("它") + 1:] == 0)
for ch, w in zip(chars, row):
    print(ch, "#" * int(round(w * 60)))
show(pictures.averaging_vs_attention)
show(pictures.weights_are_not_causes)
'''),
    change('''
# 换成我们的例句 "小明把杯子放到桌子上，因为它很满。"，再运行上一格：随机权重的模型不会因此改变读法。
'''),
    md("""
## 五、Query、Key 和 Value

Attention(Q, K, V) = softmax(QKᵀ / √dₖ) V。npformer 的 `attention_forward`（`t04_attention.py`）
正是这一行；下面和手写公式逐元素比较。数字：`npformer examples 02`；图：`02_attention_by_hand.png`。
"""),
    code('''
from npformer.t04_attention import attention_forward
from npformer.t03_softmax import softmax
rng = np.random.default_rng(0)
Q, K, V = rng.normal(size=(3, 5, 4))
by_hand = softmax(Q @ K.T / np.sqrt(4)) @ V
out, _ = attend(Q, K, V)
assert np.allclose(out, by_hand)
# 文章第一篇的手算例子
o, _ = attend(np.array([[1.0, 0]]), np.array([[1.0, 0], [0, 1]]), np.array([[2.0, 0], [0, 4]]))
print(close(o, [[1.340, 1.321]]))
show(pictures.attention_by_hand)
'''),
    change('''
# 把 V 全部乘 2：输出也乘 2（输出对 V 是线性的），权重不变。
print(np.allclose(attend(Q, K, 2 * V)[0], 2 * out))
'''),
    md("""
## 六、Attention 的计算过程

四步：生成 Query → 与可见位置的 Key 算相似度 → 转成权重 → 对 Value 加权求和。
图：`03_score_table.png`；数字：`npformer examples 03`。
"""),
    code('''
step1 = Q[-1]                                   # 1. 当前（最后一个）位置的 Query
step2 = K @ step1 / np.sqrt(4)                  # 2. 与所有可见 Key 的相似度
step3 = softmax(step2)                          # 3. 权重：非负、和为 1
step4 = step3 @ V                               # 4. 加权求和
assert np.all(step3 >= 0) and np.isclose(step3.sum(), 1)
assert np.allclose(step4, out[-1])
show(pictures.score_table)
'''),
    change('''
# 只让它看前 3 个位置（K[:3], V[:3]），结果会怎样变？
print(softmax(K[:3] @ step1 / 2) @ V[:3], step4)
'''),
    md("""
## 七、为什么要除以 \\sqrt{d_k}？

分量方差为 1 的 q、k，点积的方差是 D，标准差 √D；除以 √D 后回到 1。分数差太大时 softmax 接近 1 和 0。
代码：`attention_forward` 的 `scale`；数字：`npformer examples 20`；图：`20_score_variance.png`。
"""),
    code('''
rng = np.random.default_rng(0)
for D in (4, 64, 256):
    q, k = rng.normal(size=(2, 20000, D))
    dots = (q * k).sum(-1)
    assert abs(dots.std() / np.sqrt(D) - 1) < 0.05 and abs((dots / np.sqrt(D)).std() - 1) < 0.05
    print(D, round(dots.std(), 2), round((dots / np.sqrt(D)).std(), 3))
print("分数差 20 时的权重：", softmax(np.array([20.0, 0.0])).round(6))
show(pictures.score_variance)
'''),
    change('''
# 缩放不等于归一化到固定区间：把 q、k 都乘 3，缩放后的标准差就是 9。
q, k = rng.normal(size=(2, 20000, 64)) * 3
print(((q * k).sum(-1) / 8).std().round(2))
'''),
    md("""
## 八、什么是多头注意力？

多组 Q、K、V 投影并行，各头输出拼接再投影回隐藏维度。代码：`MultiHeadAttention`（`split_heads`、`out`）；
数字：`npformer examples 04`、`23`；图：`04_heads.png`、`23_one_head_versus_two.png`。
"""),
    code('''
mha = MultiHeadAttention(8, 2, rng=np.random.default_rng(7), dtype=np.float64)
xb = np.random.default_rng(7).normal(size=(1, 6, 8))
y, c = mha.forward(xb, mask=causal_mask(6))
assert c.weights.shape == (1, 2, 6, 6) and y.shape == xb.shape
show(pictures.heads)
show(pictures.one_head_versus_two)
'''),
    change('''
# 8 个头：每头维度 1。
print(MultiHeadAttention(8, 8, rng=np.random.default_rng(7)).head_dim)
'''),
    md("""
## 九、为什么需要因果遮罩？

位置 t 只能看位置 1～t。“因果遮罩”与主文的“因果掩码”是同一个东西（`causal_mask`）。
数字：`npformer examples 03`；图：`03_masks.png`。
"""),
    code('''
table = causal_mask(5)
print(table.astype(int))
assert table.sum(axis=1).tolist() == [1, 2, 3, 4, 5]
show(pictures.masks)
'''),
    change('''
# 滑动窗口：每个位置只看最近 2 个（sliding_window_mask）。
from npformer.t04_attention import sliding_window_mask
print(sliding_window_mask(5, 2).astype(int))
'''),
    md("""
## 十、MLP 在做什么？

MLP(x) = W₂σ(W₁x)：先扩大维度，激活，再压回去。npformer 按行向量写作 σ(xW₁)W₂，即 `FFN`
（`t07_ffn.py`，`up`、`down`）。数字：`npformer examples 07`、`25`；图：`07_activations.png`、
`25_depth_and_what_it_can_express.png`。
"""),
    code('''
from npformer.t07_ffn import FFN
from npformer.t06_activations import gelu_forward
ffn = FFN(8, rng=np.random.default_rng(0), dtype=np.float64)
xf = np.random.default_rng(1).normal(size=(1, 3, 8))
hidden = ffn.up(xf)
assert hidden.shape == (1, 3, 32)                         # 第一层扩大到 4d
assert np.allclose(ffn(xf), ffn.down(gelu_forward(hidden)[0]))
show(pictures.activations)
show(pictures.depth_and_what_it_can_express)
'''),
    change('''
# 改成 ReLU 的 FFN：FFN(8, activation="relu")，看看输出差多少。
'''),
    md("""
## 十一、残差连接

x_new = x + f(x)：原表示有一条直接路径，梯度也经它原样传回。数字：`npformer examples 08`、`22`、`26`；
图：`22_deep_stack_without_residuals.png`、`26_residual_scale.png`。
"""),
    code('''
print(close(np.array([2.0, 1]) + np.array([0.1, -0.2]), [2.1, 0.8]))
# y = x + f(x) 对 x 的梯度 = 上游梯度 + f 的那一支：恒等那一支原样传回
d_up = np.array([1.0, -2.0])
J = np.array([[0.1, 0.0], [0.3, -0.2]])                    # 某个 f 的雅可比
assert np.allclose(d_up + d_up @ J - d_up @ J, d_up)
show(pictures.residual_scale)
show(pictures.deep_stack_without_residuals)
'''),
    change('''
# 打开 npformer/pictures/layers.py 的 residual_scale，把层数 depth 改成 64 再画一次。
'''),
    md("""
## 十二、LayerNorm 与 RMSNorm

LayerNorm 减均值、除标准差；RMSNorm 只除均方根。代码：`t08_norm.py`；数字：`npformer examples 09`；
图：`09_norms.png`。
"""),
    code('''
from npformer.t08_norm import layernorm_forward, rmsnorm_forward
xn = np.random.default_rng(0).normal(3, 5, size=(1, 4, 16))
ln, _ = layernorm_forward(xn, np.ones(16), np.zeros(16), eps=0.0)
rms, _ = rmsnorm_forward(xn, np.ones(16), eps=0.0)
assert np.allclose(ln.mean(-1), 0) and np.allclose(ln.std(-1), 1)
assert np.allclose(np.sqrt((rms ** 2).mean(-1)), 1)
show(pictures.norms)
'''),
    change('''
# gamma 改成 2：两种归一化的输出都乘 2（可学习缩放）。
'''),
    md("""
## 十三、Logits 是什么？

隐藏向量 → 词表投影 → Logits → Softmax → 概率。代码：`DecoderLM.forward`、`TiedHead`；
数字：`npformer examples 10`；图：`10_logits_to_probabilities.png`、`tour_next_token.png`。
"""),
    code('''
print(close(softmax(np.array([2.0, 1.0, 0.0])), [0.665, 0.245, 0.090]))
probs = softmax(logits[0, -1].astype(np.float64))
assert probs.shape == (50,) and np.isclose(probs.sum(), 1)
show(pictures.logits_to_probabilities)
'''),
    change('''
# 温度：logits 除以 0.5 会更尖，除以 2 会更平。
print(softmax(np.array([2.0, 1.0, 0.0]) / 0.5).round(3), softmax(np.array([2.0, 1.0, 0.0]) / 2).round(3))
'''),
    md("""
## 十四、Transformer 是否真的存储知识？

参数分布在 Embedding、Attention 投影、MLP 等各处。下面数教学小模型每一部分的参数量（只是“在哪里”，
不说明“知识在哪里”）。
"""),
    code('''
groups = {}
for name, p in model.named_parameters():
    part = ("Embedding" if name.startswith(("tokens", "positions")) else
            "Attention" if ".attn." in name else "MLP" if ".ffn." in name else "Norm / 其他")
    groups[part] = groups.get(part, 0) + p.data.size
print(groups)
assert sum(groups.values()) == model.num_parameters()
'''),
    change('''
# 把 d_model 改成 64、层数改成 4，各部分的比例怎样变？
m = DecoderLM(DecoderConfig(d_model=64, n_layers=4), np.random.default_rng(0)); print(m.num_parameters())
'''),
    md("""
## 十五、KV Cache 为什么能加速生成？

旧 Token 的 K/V 存进缓存，新 Token 只算自己的位置：结果与每步重算完全相同。代码：`t13_kv_cache.py` 的
`KVCache`，`DecoderLM.new_kv_cache`；数字：`npformer examples 12`、`14`；图：`14_kv_cache_work.png`、
`12_kv_cache_gqa_memory.png`。
"""),
    code('''
m64 = DecoderLM(DecoderConfig(), np.random.default_rng(7)).astype(np.float64)
ids = TUTORIAL_IDS
full, _ = m64.forward(ids)
kv = m64.new_kv_cache(1)
steps = [m64.forward(ids[:, :4], kv_cache=kv)[0]]
for t in range(4, 8):
    steps.append(m64.forward(ids[:, t:t + 1], kv_cache=kv)[0])
cached = np.concatenate(steps, axis=1)
assert np.allclose(cached, full, atol=1e-10)               # 同样的 logits
show(pictures.kv_cache_work)
show(pictures.kv_memory)
'''),
    change('''
# 把前缀长度 4 改成 1：一个一个地喂，结果仍然一样。
'''),
    md("""
## 十六、上下文越长，计算为何越贵？

注意力表是 N × N：长度翻倍，分数个数变成四倍；滑动窗口把它限制在 N × w。数字：`npformer examples 15`；
图：`15_attention_cost.png`。
"""),
    code('''
sizes = {}
for N in (128, 256, 512):
    _, c = MultiHeadAttention(8, 2, rng=np.random.default_rng(0)).forward(np.zeros((1, N, 8), np.float32),
                                                                          mask=causal_mask(N))
    sizes[N] = c.weights.size
assert sizes[256] == 4 * sizes[128] and sizes[512] == 4 * sizes[256]
print(sizes)
show(pictures.attention_cost)
'''),
    change('''
# 窗口 64 时，每行最多 64 个可读位置：
print(sliding_window_mask(512, 64).sum(axis=1).max())
'''),
    md("""
## 本篇总结

1. Embedding 把 Token ID 变成向量（二）；2. 位置信息让模型理解顺序（三）；
3. Attention 跨位置读取（四至八）；4. MLP 在位置内部做非线性计算（十）；
5. 因果遮罩挡住未来的位置（九）；6. 残差与归一化让深层网络稳定（十一、十二）；
7. KV Cache 加速生成，但占用显存（十五）。下一步：`npformer exercises ws` 自己写一遍反向传播。
"""),
]


def build(cells, path):
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    start = time.perf_counter()
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(HERE)}}).execute()
    nbformat.write(notebook, path)
    print(f"{path.name}: {len(cells)} cells, ran in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    build(MAIN, HERE / "01_main_article.ipynb")
    build(OVERVIEW, HERE / "02_overview_article.ipynb")
