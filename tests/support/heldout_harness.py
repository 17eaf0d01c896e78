"""The harness behind the held-out sets' check.py (sets 3 and 4): each set's check.py calls
``main(argv, its folder, its minimums)``.

It writes an answer key (``npformer exercises DIR --solutions --forward``) to a temporary
directory, then, for every entry of mistakes.json and alternatives.json:

- the place: the file and function are one of the exercise's bodies in the catalog, the
  kind matches (a backward body or a forward one), ``old`` occurs exactly once in the key's
  file and lies inside the named function (an alternative's ``body`` replaces that whole
  ``def``, which it must define again under the same name);
- the edited file compiles;
- the edit runs: a copy of npformer whose key files are the answer key's, with the one
  file edited, is imported afresh and the exercise's scenarios run on it (float64 unless a
  scenario says otherwise, fixed seeds, gradients of the inputs and of every parameter,
  outputs, caches that matter). A mistake must run every ordinary scenario without raising
  and give different numbers (relative difference > 1e-7, or a different shape, or NaN
  where the key has a number) in at least one scenario; when it differs only in special
  scenarios (masks with empty rows, padding, GQA, ignored targets, custom scales, windows,
  repeated ids, more than one layer, accumulated gradients ...) it must carry a ``note``.
  An alternative must match the key in every scenario to 1e-10 (relative to the largest
  value of each array; float32 scenarios to 1e-5).

And the set as a whole: at least the set's minimum of mistakes and of mistakes per exercise
with bodies to write, a backward share within its range, at least two alternatives for each
of the twelve functions that need them. One summary line at the end; the exit status is 0
when every rule holds.
"""
from __future__ import annotations

import ast
import collections
import importlib
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KINDS = ("backward", "forward")
MISTAKE_FIELDS = {"id", "exercise", "file", "function", "old", "new", "what", "kind"}
ALTERNATIVE_FIELDS = {"id", "exercise", "file", "function", "body", "style"}
DIFFERENT = 1e-7           # a mistake must differ by more than this (relative)
SAME = 1e-10               # an alternative must agree to this (relative), float64
SAME_F32 = 1e-5


# == the scenarios: what a careful grader would run ==========================================
def rng(seed):
    return np.random.default_rng(seed)


def randomize(module, r, std=0.5):
    """Non-trivial parameters: gains near 1 but not 1, biases and shifts not 0."""
    for name, p in module.named_parameters():
        base = 1.0 if name.endswith("gamma") else 0.0
        p.data = (base + std * r.standard_normal(p.data.shape)).astype(p.data.dtype)
        p.grad = np.zeros_like(p.data)
    return module


def prefill(module, r):
    """Gradients that already hold something (a layer used twice, grads not zeroed)."""
    for p in module.parameters():
        p.grad = r.standard_normal(p.data.shape).astype(p.data.dtype)


def grads(module, prefix="grad."):
    return {prefix + n: p.grad.copy() for n, p in module.named_parameters()}


F64 = np.float64


# -- 01 softmax
def sm_basic(nf):
    r = rng(1)
    x = 2 * r.standard_normal((2, 3, 5))
    d = r.standard_normal(x.shape)
    y, c = nf.softmax_forward(x)
    return {"y": y, "dx": nf.softmax_backward(d, c)}


def sm_axis(nf):
    r = rng(2)
    out = {}
    for axis in (1, 0):
        x = 2 * r.standard_normal((3, 4, 3))
        d = r.standard_normal(x.shape)
        y, c = nf.softmax_forward(x, axis=axis)
        out[f"y{axis}"], out[f"dx{axis}"] = y, nf.softmax_backward(d, c)
    return out


def sm_mask(nf):
    r = rng(3)
    x = 2 * r.standard_normal((2, 3, 5))
    d = r.standard_normal(x.shape)
    mask = r.random((2, 3, 5)) < 0.6
    mask[0, 1] = False                     # a row with nothing to read
    mask[1, 2] = True
    y, c = nf.softmax_forward(x, mask=mask)
    return {"y": y, "dx": nf.softmax_backward(d, c)}


def sm_big(nf):
    r = rng(4)
    x = 3 * r.standard_normal((2, 4, 5))
    x[1] += 2000                           # huge scores, rows far apart
    x[0, 1] += 800
    d = r.standard_normal(x.shape)
    y, c = nf.softmax_forward(x)
    return {"y": y, "dx": nf.softmax_backward(d, c)}


# -- 02 activations
ACTS = ("relu", "gelu", "gelu_tanh", "silu")


def act_run(nf, x, seed):
    r = rng(seed)
    out = {}
    for name in ACTS:
        fwd, bwd = getattr(nf, name + "_forward"), getattr(nf, name + "_backward")
        d = r.standard_normal(x.shape)
        y, c = fwd(x)
        out[name + ".y"], out[name + ".dx"] = y, bwd(d, c)
    return out


def act_basic(nf):
    return act_run(nf, 2 * rng(5).standard_normal((3, 7)), 6)


def act_edges(nf):
    x = np.array([[0.0, -0.0, 1e-9, -1e-9, 30.0, -30.0, 8.0, -8.0]])
    return act_run(nf, x, 7)


# -- 03 linear
def lin_fn(nf):
    r = rng(8)
    x, w, b = r.standard_normal((2, 3, 4)), r.standard_normal((4, 5)), r.standard_normal(5)
    d = r.standard_normal((2, 3, 5))
    y, c = nf.linear_forward(x, w, b)
    dx, dw, db = nf.linear_backward(d, c)
    y2, c2 = nf.linear_forward(x, w)
    dx2, dw2, db2 = nf.linear_backward(d, c2)
    return {"y": y, "dx": dx, "dw": dw, "db": db, "y2": y2, "dx2": dx2, "dw2": dw2, "db2": db2}


def lin_module(nf):
    r = rng(9)
    layer = randomize(nf.Linear(4, 5, True, r, dtype=F64), r)
    x = r.standard_normal((2, 3, 4))
    y, c = layer.forward(x)
    dx = layer.backward(r.standard_normal(y.shape), c)
    return {"y": y, "dx": dx, **grads(layer)}


def lin_shapes(nf):
    r = rng(10)
    out = {}
    for shape in ((3, 4), (2, 2, 3, 4)):
        layer = randomize(nf.Linear(4, 5, True, r, dtype=F64), r)
        x = r.standard_normal(shape)
        y, c = layer.forward(x)
        dx = layer.backward(r.standard_normal(y.shape), c)
        out.update({f"{len(shape)}.y": y, f"{len(shape)}.dx": dx, **grads(layer, f"{len(shape)}.grad.")})
    return out


def lin_accumulate(nf):
    r = rng(11)
    layer = randomize(nf.Linear(4, 5, True, r, dtype=F64), r)
    prefill(layer, r)
    x = r.standard_normal((2, 3, 4))
    y, c = layer.forward(x)
    dx = layer.backward(r.standard_normal(y.shape), c)
    return {"dx": dx, **grads(layer)}


# -- 04 embedding
IDS = np.array([[1, 2, 3, 1, 4], [5, 2, 6, 0, 3]])


def emb_basic(nf):
    r = rng(12)
    table = randomize(nf.Embedding(7, 4, r, dtype=F64), r)
    y, c = table.forward(IDS)
    back = table.backward(r.standard_normal(y.shape), c)
    return {"y": y, "back": back, **grads(table)}


def emb_padding(nf):
    r = rng(13)
    table = randomize(nf.Embedding(7, 4, r, dtype=F64, padding_idx=0), r)
    prefill(table, r)
    y, c = table.forward(IDS)
    table.backward(r.standard_normal(y.shape), c)
    return {"y": y, **grads(table)}


def emb_stream(nf):
    r = rng(14)
    tokens = randomize(nf.Embedding(9, 4, r, dtype=F64), r)
    positions = randomize(nf.LearnedPositions(6, 4, r, dtype=F64), r)
    embed = nf.Embeddings(tokens, positions)
    x, c = embed.forward(IDS)
    embed.backward(r.standard_normal(x.shape), c)
    return {"x": x, **grads(tokens, "tok."), **grads(positions, "pos.")}


def emb_stream_variants(nf):
    r = rng(15)
    tokens = randomize(nf.Embedding(9, 4, r, dtype=F64), r)
    positions = randomize(nf.LearnedPositions(8, 4, r, dtype=F64), r)
    segments = randomize(nf.Embedding(2, 4, r, dtype=F64), r)
    norm = randomize(nf.LayerNorm(4, dtype=F64), r)
    embed = nf.Embeddings(tokens, positions, segments, norm, scale=1.7)
    for m in (tokens, positions, segments, norm):
        prefill(m, r)
    pos = np.array([[0, 1, 2, 3, 4], [2, 3, 4, 5, 6]])
    seg = np.array([[0, 0, 1, 1, 1], [0, 1, 1, 0, 0]])
    x, c = embed.forward(IDS, pos, seg)
    embed.backward(r.standard_normal(x.shape), c)
    sin = nf.Embeddings(tokens, nf.SinusoidalPositions(8, 4, dtype=F64))
    x2, c2 = sin.forward(IDS)
    sin.backward(r.standard_normal(x2.shape), c2)
    return {"x": x, "x2": x2, **grads(tokens, "tok."), **grads(positions, "pos."),
            **grads(segments, "seg."), **grads(norm, "norm.")}


def emb_table(nf):
    return {"t1": nf.sinusoid_table(6, 8), "t2": nf.sinusoid_table(5, 6, base=100.0)}


def emb_table_odd(nf):
    return {"t": nf.sinusoid_table(4, 5)}


# -- 05 attention
def att_run(nf, q, k, v, seed, **kw):
    r = rng(seed)
    out, c = nf.attention_forward(q, k, v, **kw)
    dq, dk, dv = nf.attention_backward(r.standard_normal(out.shape), c)
    return {"out": out, "weights": c.weights, "dq": dq, "dk": dk, "dv": dv}


def qkv(seed, B=2, H=2, N=4, M=4, D=3, Dv=None, H_kv=None):
    r = rng(seed)
    H_kv = H if H_kv is None else H_kv
    return (r.standard_normal((B, H, N, D)), r.standard_normal((B, H_kv, M, D)),
            r.standard_normal((B, H_kv, M, D if Dv is None else Dv)))


def att_basic(nf):
    q, k, v = qkv(16)
    return att_run(nf, q, k, v, 17)


def att_causal(nf):
    q, k, v = qkv(18)
    mask = np.ones((2, 1, 1, 4), bool)
    mask[1, ..., 3] = False                # padding at the end of the second sequence
    return att_run(nf, q, k, v, 19, mask=mask, causal=True)


def att_special(nf):
    q, k, v = qkv(20, N=3, M=5, Dv=4)
    a = att_run(nf, q, k, v, 21, causal=True, window=2, scale=0.6)
    mask = np.ones((2, 2, 3, 5), bool)
    mask[0, 1, 2] = False                  # a query with nothing to read
    mask[1, :, :, 0] = False
    b = att_run(nf, q, k, v, 22, mask=mask)
    return {**{"a." + n: x for n, x in a.items()}, **{"b." + n: x for n, x in b.items()}}


def att_may_read(nf):
    return {"t": np.asarray(nf.may_read(np.arange(5)[:, None], np.arange(5)[None, :]), float),
            "t2": np.asarray(nf.may_read(np.arange(3, 6)[:, None], np.arange(6)[None, :]), float)}


def att_window(nf):
    return {"t": np.asarray(nf.may_read(np.arange(6)[:, None], np.arange(6)[None, :], 3), float)}


# -- 06 multi-head
def mha_run(nf, attn, x, seed, mask=None, accumulate=False):
    r = rng(seed)
    randomize(attn, r)
    if accumulate:
        prefill(attn, r)
    y, c = attn.forward(x, mask)
    dx = attn.backward(r.standard_normal(y.shape), c)
    return {"y": y, "dx": dx, **grads(attn)}


def mha_basic(nf):
    r = rng(23)
    x = r.standard_normal((2, 4, 8))
    mask = np.ones((2, 1, 1, 4), bool)
    mask[1, ..., 3] = False
    return mha_run(nf, nf.MultiHeadAttention(8, 2, bias=True, rng=r, dtype=F64, causal=True), x, 24, mask)


def mha_three(nf):
    r = rng(25)
    x = r.standard_normal((2, 3, 12))
    return mha_run(nf, nf.MultiHeadAttention(12, 3, rng=r, dtype=F64), x, 26)


def mha_gqa(nf):
    r = rng(27)
    x = r.standard_normal((2, 4, 8))
    return mha_run(nf, nf.MultiHeadAttention(8, 4, n_kv_heads=2, bias=True, rng=r, dtype=F64,
                                             causal=True), x, 28, accumulate=True)


def mha_rope(nf):
    r = rng(29)
    x = r.standard_normal((2, 4, 8))
    return mha_run(nf, nf.MultiHeadAttention(8, 2, rope=nf.Rotary(4), rng=r, dtype=F64, causal=True),
                   x, 30)


def mha_flash(nf):
    r = rng(31)
    x = r.standard_normal((2, 5, 8))
    return mha_run(nf, nf.MultiHeadAttention(8, 2, n_kv_heads=1, rng=r, dtype=F64, causal=True,
                                             kernel=nf.BlockwiseAttention(2)), x, 32)


# -- 07 rope
def rope_run(nf, rotary, x, positions, seed):
    r = rng(seed)
    y, c = rotary.forward(x, positions)
    dx = rotary.backward(r.standard_normal(y.shape), c)
    return {"y": y, "dx": dx, "angles": rotary.angles(positions)}


def rope_half(nf):
    x = rng(33).standard_normal((2, 2, 4, 6))
    return rope_run(nf, nf.Rotary(6), x, np.arange(4), 34)


def rope_interleaved(nf):
    x = rng(35).standard_normal((2, 2, 4, 6))
    return rope_run(nf, nf.Rotary(6, layout="interleaved"), x, np.arange(4), 36)


def rope_partial(nf):
    r = rng(37)
    out = {}
    positions = np.array([[3, 4, 5, 6], [0, 2, 4, 9]])
    for layout in ("half", "interleaved"):
        for fraction in (0.5, 0.75):
            x = r.standard_normal((2, 2, 4, 8))
            res = rope_run(nf, nf.Rotary(8, base=500.0, layout=layout, fraction=fraction), x, positions, 38)
            out.update({f"{layout}{fraction}.{n}": v for n, v in res.items()})
    return out


# -- 08 ffn
def ffn_basic(nf):
    r = rng(39)
    out = {}
    for act in ("gelu", "relu", "gelu_tanh", "silu"):
        ffn = randomize(nf.FFN(4, hidden=6, activation=act, bias=True, rng=r, dtype=F64), r)
        x = r.standard_normal((2, 3, 4))
        y, c = ffn.forward(x)
        dx = ffn.backward(r.standard_normal(y.shape), c)
        out.update({act + ".y": y, act + ".dx": dx, **grads(ffn, act + ".grad.")})
    return out


def ffn_gate(nf):
    r = rng(40)
    g, u = 2 * r.standard_normal((2, 3, 6)), r.standard_normal((2, 3, 6))
    h, c = nf.swiglu_gate_forward(g, u)
    dg, du = nf.swiglu_gate_backward(r.standard_normal(h.shape), c)
    return {"h": h, "dg": dg, "du": du}


def ffn_swiglu(nf):
    r = rng(41)
    out = {}
    for bias in (False, True):
        ffn = randomize(nf.SwiGLU(4, 6, bias=bias, rng=r, dtype=F64), r)
        x = r.standard_normal((2, 3, 4))
        y, c = ffn.forward(x)
        dx = ffn.backward(r.standard_normal(y.shape), c)
        out.update({f"{bias}.y": y, f"{bias}.dx": dx, **grads(ffn, f"{bias}.grad.")})
    return out


# -- 09 norm
def norm_fns(nf, x, eps_ln, eps_rms, seed):
    r = rng(seed)
    d = x.shape[-1]
    gamma, beta = 1 + 0.5 * r.standard_normal(d), 0.5 * r.standard_normal(d)
    y, c = nf.layernorm_forward(x, gamma, beta, eps_ln)
    dx, dg, db = nf.layernorm_backward(r.standard_normal(y.shape), c)
    y2, c2 = nf.rmsnorm_forward(x, gamma, eps_rms)
    dx2, dg2 = nf.rmsnorm_backward(r.standard_normal(y2.shape), c2)
    return {"ln.y": y, "ln.dx": dx, "ln.dg": dg, "ln.db": db, "rms.y": y2, "rms.dx": dx2, "rms.dg": dg2}


def norm_basic(nf):
    x = 2 * rng(42).standard_normal((2, 3, 6)) + 0.5
    return norm_fns(nf, x, 1e-5, 1e-6, 43)


def norm_big_eps(nf):
    x = rng(44).standard_normal((2, 3, 6))
    return norm_fns(nf, x, 0.3, 0.3, 45)


def norm_modules(nf, shape=(2, 3, 6), accumulate=False, seed=46):
    r = rng(seed)
    out = {}
    for name in ("LayerNorm", "RMSNorm"):
        norm = randomize(getattr(nf, name)(6, dtype=F64), r)
        if accumulate:
            prefill(norm, r)
        x = r.standard_normal(shape)
        y, c = norm.forward(x)
        dx = norm.backward(r.standard_normal(y.shape), c)
        out.update({name + ".y": y, name + ".dx": dx, **grads(norm, name + ".grad.")})
    return out


def norm_module_basic(nf):
    return norm_modules(nf)


def norm_special(nf):
    x = 2 * rng(47).standard_normal((4, 6))
    out = {"fn2d." + n: v for n, v in norm_fns(nf, x, 1e-5, 1e-6, 48).items()}
    out.update({"mod2d." + n: v for n, v in norm_modules(nf, (4, 6), True, 49).items()})
    out.update({"acc." + n: v for n, v in norm_modules(nf, (2, 3, 6), True, 50).items()})
    return out


# -- 10 block
def block_run(nf, config, seed, mask=True, accumulate=False, **kw):
    from npformer.t09_block import build_block  # noqa: imported from the copy under test
    r = rng(seed)
    block = randomize(build_block(config, r, F64), r, 0.4)
    if accumulate:
        prefill(block, r)
    x = r.standard_normal((2, 4, config.d_model))
    padding = None
    if mask:
        padding = np.ones((2, 1, 1, 4), bool)
        padding[1, ..., 3] = False
    ffn_inputs = {k: v for k, v in kw.items() if k == "token_mask"}
    ffn_grads = {k: v for k, v in kw.items() if k != "token_mask"}
    y, c = block.forward(x, padding, **ffn_inputs)
    dx = block.backward(r.standard_normal(y.shape), c, **ffn_grads)
    return {"y": y, "dx": dx, **grads(block)}


def block_pre(nf):
    return block_run(nf, nf.BlockConfig(d_model=8, n_heads=2), 51)


def block_post(nf):
    return block_run(nf, nf.BlockConfig(d_model=8, n_heads=2, prenorm=False), 52)


def block_llama(nf):
    out = {}
    for prenorm in (True, False):
        config = nf.BlockConfig(d_model=8, n_heads=2, norm="rmsnorm", ffn="swiglu", rope=True,
                                prenorm=prenorm)
        out.update({f"{prenorm}.{n}": v for n, v in block_run(nf, config, 53).items()})
    return out


def block_special(nf):
    out = {}
    for prenorm in (True, False):
        res = block_run(nf, nf.BlockConfig(d_model=8, n_heads=2, prenorm=prenorm), 54, accumulate=True)
        out.update({f"acc{prenorm}.{n}": v for n, v in res.items()})
        config = nf.BlockConfig(d_model=8, n_heads=2, ffn="swiglu", n_experts=4, top_k=2, prenorm=prenorm)
        token_mask = np.ones((2, 4), bool)
        token_mask[1, 3] = False
        res = block_run(nf, config, 55, token_mask=token_mask,
                        d_mean_probs=np.array([0.3, -0.2, 0.5, 0.1]))
        out.update({f"moe{prenorm}.{n}": v for n, v in res.items()})
    return out


# -- 11 model
def model_run(nf, config, seed, key_mask=None, accumulate=False, ids=None):
    r = rng(seed)
    model = randomize(nf.DecoderLM(config, r, F64), r, 0.3)
    if accumulate:
        prefill(model, r)
    if ids is None:
        ids = r.integers(0, config.vocab_size, (2, 5))
    logits, c = model.forward(ids, key_mask)
    back = model.backward(r.standard_normal(logits.shape), c)
    return {"logits": logits, "back": back, "aux": np.float64(c.aux_loss), **grads(model)}


def model_tied(nf):
    key_mask = np.ones((2, 5), bool)
    key_mask[1, 4] = False
    return model_run(nf, nf.DecoderConfig(vocab_size=11, max_len=8, tie_embeddings=True), 56, key_mask)


def model_llama(nf):
    return model_run(nf, nf.DecoderConfig.llama(vocab_size=11, max_len=8), 57)


def model_head(nf):
    r = rng(58)
    table = randomize(nf.Embedding(7, 4, r, dtype=F64), r)
    head = nf.TiedHead(table)
    x = r.standard_normal((2, 3, 4))
    logits, c = head.forward(x)
    dx = head.backward(r.standard_normal(logits.shape), c)
    return {"logits": logits, "dx": dx, **grads(table)}


def model_special(nf):
    out = {}
    r = rng(59)
    head_table = randomize(nf.Embedding(7, 4, r, dtype=F64), r)
    prefill(head_table, r)
    head = nf.TiedHead(head_table)
    logits, c = head.forward(r.standard_normal((2, 3, 4)))
    out["head.dx"] = head.backward(r.standard_normal(logits.shape), c)
    out.update(grads(head_table, "head.grad."))
    deep = nf.DecoderConfig.gpt2(vocab_size=11, max_len=8, n_layers=2)
    out.update({"deep." + n: v for n, v in model_run(nf, deep, 60, accumulate=True).items()})
    padded = nf.DecoderConfig(vocab_size=11, max_len=8, tie_embeddings=True, pad_token_id=0)
    ids = np.array([[3, 4, 0, 0, 0], [5, 0, 6, 7, 0]])
    out.update({"pad." + n: v for n, v in model_run(nf, padded, 61, ids=ids).items()})
    mixtral = nf.DecoderConfig.mixtral(vocab_size=11, max_len=8, n_layers=2, n_kv_heads=1, n_experts=4,
                                       moe_aux_objective="pooled", moe_aux_weight=0.2)
    key_mask = np.ones((2, 5), bool)
    key_mask[0, 4] = False
    out.update({"moe." + n: v for n, v in model_run(nf, mixtral, 62, key_mask).items()})
    return out


# -- 12 loss
def loss_logsm(nf):
    r = rng(63)
    x = 2 * r.standard_normal((2, 3, 5))
    y, c = nf.log_softmax_forward(x)
    return {"y": y, "dx": nf.log_softmax_backward(r.standard_normal(x.shape), c)}


def loss_logsm_special(nf):
    r = rng(64)
    out = {}
    x = 2 * r.standard_normal((4, 3, 2))
    y, c = nf.log_softmax_forward(x, axis=0)
    out["ax.y"], out["ax.dx"] = y, nf.log_softmax_backward(r.standard_normal(x.shape), c)
    x = 400 * r.standard_normal((2, 5))
    x[1] += 3000
    y, c = nf.log_softmax_forward(x)
    out["big.y"], out["big.dx"] = y, nf.log_softmax_backward(r.standard_normal(x.shape), c)
    return out


def ce_run(nf, logits, targets, d_loss):
    loss, c = nf.cross_entropy_forward(logits, targets)
    d, none = nf.cross_entropy_backward(d_loss, c)
    return {"loss": np.float64(loss), "d": d, "none": none}


def loss_ce(nf):
    r = rng(65)
    logits = 2 * r.standard_normal((2, 3, 5))
    return ce_run(nf, logits, r.integers(0, 5, (2, 3)), 1.7)


def loss_ce_special(nf):
    r = rng(66)
    out = {}
    logits = 2 * r.standard_normal((2, 3, 5))
    targets = np.array([[1, -100, 4], [-100, 0, 2]])
    out.update({"ign." + n: v for n, v in ce_run(nf, logits, targets, 0.8).items()})
    out.update({"all." + n: v for n, v in ce_run(nf, logits, np.full((2, 3), -100), 1.3).items()})
    out.update({"2d." + n: v for n, v in ce_run(nf, 2 * r.standard_normal((4, 6)),
                                                  np.array([0, 5, -100, 2]), 1.0).items()})
    big = 300 * r.standard_normal((2, 5))
    out.update({"big." + n: v for n, v in ce_run(nf, big, np.array([1, 3]), 1.0).items()})
    return out


# -- 13 optim
def adam_run(nf, seed, step, wd, grad_scale=1.0, dtype=F64, zero_state=False):
    r = rng(seed)
    data = r.standard_normal((3, 4)).astype(dtype)
    grad = (grad_scale * r.standard_normal((3, 4))).astype(dtype)
    m = np.zeros_like(data) if zero_state else (0.1 * r.standard_normal((3, 4))).astype(dtype)
    v = np.zeros_like(data) if zero_state else (0.01 * r.random((3, 4))).astype(dtype)
    before = data.copy()
    new, m2, v2 = nf.adamw_update(data, grad, m, v, step, 0.01, (0.9, 0.99), 1e-8, wd)
    return {"data": new, "m": m2, "v": v2, "update": np.asarray(new, F64) - before}


def adam_basic(nf):
    return adam_run(nf, 67, 3, 0.1)


def adam_first(nf):
    out = {f"a.{n}": v for n, v in adam_run(nf, 68, 1, 0.0, zero_state=True).items()}
    out.update({f"b.{n}": v for n, v in adam_run(nf, 69, 1, 0.05, 1e-3, zero_state=True).items()})
    out.update({f"c.{n}": v for n, v in adam_run(nf, 70, 10, 0.2, 1e-3).items()})
    return out


def adam_f32(nf):
    return adam_run(nf, 71, 2, 0.1, dtype=np.float32)


# -- 14 kv-cache
def gqa_run(nf, q, k, v, seed, **kw):
    r = rng(seed)
    out, c = nf.grouped_attention_forward(q, k, v, **kw)
    dq, dk, dv = nf.grouped_attention_backward(r.standard_normal(out.shape), c)
    return {"out": out, "weights": c.weights, "dq": dq, "dk": dk, "dv": dv}


def kv_grouped(nf):
    out = {}
    for H_kv in (2, 1, 4):
        q, k, v = qkv(72 + H_kv, H=4, N=3, M=3, H_kv=H_kv)
        res = gqa_run(nf, q, k, v, 80, causal=True)
        out.update({f"{H_kv}.{n}": x for n, x in res.items()})
    return out


def kv_grouped_special(nf):
    q, k, v = qkv(81, H=4, N=3, M=6, H_kv=2, Dv=5)
    mask = np.ones((2, 1, 1, 6), bool)
    mask[1, ..., :2] = False
    a = gqa_run(nf, q, k, v, 82, mask=mask, causal=True, window=3, scale=0.7)
    mask2 = np.ones((2, 4, 3, 6), bool)
    mask2[0, 3, 1] = False
    b = gqa_run(nf, q, k, v, 83, mask=mask2)
    return {**{"a." + n: x for n, x in a.items()}, **{"b." + n: x for n, x in b.items()}}


def kv_layer(nf, window=None, mask=False):
    from npformer.t13_kv_cache import KVCache  # noqa: the copy under test
    r = rng(84)
    cache = KVCache(1, 2, 2, 8, 3, F64)
    layer = cache.layers[0]
    out = {}
    for step, n in enumerate((3, 1, 2)):
        k_new, v_new = r.standard_normal((2, 2, n, 3)), r.standard_normal((2, 2, n, 3))
        m = None
        if mask:
            m = np.ones((2, 1, 1, cache.length + n), bool)
            m[1, ..., 0] = False
        k, v, m2 = layer.extend(k_new, v_new, m, window)
        cache.advance(n)
        out.update({f"{step}.k": k.copy(), f"{step}.v": v.copy(),
                    f"{step}.mask": None if m2 is None else np.asarray(m2, float)})
    out["stored.k"], out["stored.v"] = cache.k.copy(), cache.v.copy()
    return out


def kv_layer_basic(nf):
    return kv_layer(nf)


def kv_layer_window(nf):
    return kv_layer(nf, window=2, mask=True)


def decode(nf, config, seed, prompt, steps):
    r = rng(seed)
    model = randomize(nf.DecoderLM(config, r, F64), r, 0.3)
    ids = r.integers(0, config.vocab_size, (2, prompt + steps))
    cache = model.new_kv_cache(2)
    pieces = [model.forward(ids[:, :prompt], kv_cache=cache)[0]]
    for t in range(prompt, prompt + steps):
        pieces.append(model.forward(ids[:, t:t + 1], kv_cache=cache)[0])
    return {"logits": np.concatenate(pieces, axis=1)}


def kv_decode(nf):
    return decode(nf, nf.DecoderConfig.llama(vocab_size=11, max_len=8, n_heads=4, n_kv_heads=2), 85, 3, 3)


def kv_decode_window(nf):
    return decode(nf, nf.DecoderConfig(vocab_size=11, max_len=10, n_heads=2, n_kv_heads=1, window=3),
                  86, 5, 3)


# -- 15 moe
def moe_run(nf, seed, expert="swiglu", top_k=2, bias=False, token_mask=None, accumulate=False, **kw):
    r = rng(seed)
    moe = nf.MoE(4, 4, top_k=top_k, hidden=6, expert=expert, bias=bias, aux_weight=0.3, rng=r, dtype=F64)
    randomize(moe, r)
    moe.router.weight.data = 1.5 * r.standard_normal(moe.router.weight.shape)
    if accumulate:
        prefill(moe, r)
    x = r.standard_normal((2, 3, 4))
    y, c = moe.forward(x, token_mask)
    dx = moe.backward(r.standard_normal(y.shape), c, **kw)
    return {"y": y, "aux": np.float64(c.aux_loss), "load": c.load, "P": c.mean_probs,
            "weights": c.weights, "dx": dx, **grads(moe)}


def moe_basic(nf):
    return moe_run(nf, 87)


def moe_kinds(nf):
    out = {f"gelu.{n}": v for n, v in moe_run(nf, 88, "gelu", 2, True).items()}
    out.update({f"k3.{n}": v for n, v in moe_run(nf, 89, "swiglu", 3).items()})
    out.update({f"k1.{n}": v for n, v in moe_run(nf, 90, "relu", 1, True).items()})
    return out


def moe_special(nf):
    token_mask = np.array([[True, True, False], [True, False, False]])
    out = {f"pad.{n}": v for n, v in moe_run(nf, 91, token_mask=token_mask).items()}
    out.update({f"daux.{n}": v for n, v in moe_run(nf, 92, d_aux=0.7).items()})
    out.update({f"dP.{n}": v for n, v in moe_run(nf, 93, token_mask=token_mask,
                                                  d_mean_probs=np.array([0.4, -0.3, 0.2, 0.9])).items()})
    out.update({f"acc.{n}": v for n, v in moe_run(nf, 94, accumulate=True).items()})
    return out


# -- 16 encoder
def enc_pool(nf):
    r = rng(95)
    states = r.standard_normal((2, 4, 3))
    key_mask = np.array([[True, True, True, False], [True, True, False, False]])
    out = {}
    for name, m in (("none", None), ("mask", key_mask)):
        y, c = nf.mean_pool_forward(states, m)
        out[name + ".y"], out[name + ".dx"] = y, nf.mean_pool_backward(r.standard_normal(y.shape), c)
    return out


def enc_pool_empty(nf):
    r = rng(96)
    states = r.standard_normal((2, 4, 3))
    key_mask = np.array([[True, False, True, False], [False, False, False, False]])
    y, c = nf.mean_pool_forward(states, key_mask)
    return {"y": y, "dx": nf.mean_pool_backward(r.standard_normal(y.shape), c)}


def enc_l2(nf):
    r = rng(97)
    x = 2 * r.standard_normal((2, 3, 5))
    y, c = nf.l2_normalize_forward(x)
    return {"y": y, "dx": nf.l2_normalize_backward(r.standard_normal(y.shape), c)}


def enc_l2_short(nf):
    r = rng(98)
    x = r.standard_normal((4, 5))
    x[1] = 0.0
    x[2] *= 1e-14
    y, c = nf.l2_normalize_forward(x)
    return {"y": y, "dx": nf.l2_normalize_backward(r.standard_normal(y.shape), c)}


def enc_run(nf, config, seed, accumulate=False, ids=None):
    r = rng(seed)
    encoder = randomize(nf.Encoder(config, r, F64), r, 0.3)
    if accumulate:
        prefill(encoder, r)
    if ids is None:
        ids = r.integers(1, config.vocab_size, (2, 5))
    key_mask = np.ones((2, 5), bool)
    key_mask[1, 3:] = False
    segments = np.array([[0, 0, 1, 1, 1], [0, 0, 0, 1, 1]])
    states, c = encoder.forward(ids, key_mask, segments)
    back = encoder.backward(r.standard_normal(states.shape), c)
    return {"states": states, "back": back, **grads(encoder)}


def enc_bert(nf):
    return enc_run(nf, nf.EncoderConfig(vocab_size=13, max_len=8), 99)


def enc_special(nf):
    out = {f"pre.{n}": v for n, v in enc_run(nf, nf.EncoderConfig(vocab_size=13, max_len=8, prenorm=True,
                                                                   n_layers=2), 100).items()}
    config = nf.EncoderConfig(vocab_size=13, max_len=8, n_layers=2, embed_scale=1.5, pad_token_id=0)
    ids = np.array([[2, 0, 5, 6, 0], [7, 8, 0, 0, 0]])
    out.update({f"deep.{n}": v for n, v in enc_run(nf, config, 101, True, ids).items()})
    return out


# -- 17 seq2seq
def cross_run(nf, attn, seed, M=5, mask=True, accumulate=False):
    r = rng(seed)
    randomize(attn, r)
    if accumulate:
        prefill(attn, r)
    x = r.standard_normal((2, 3, 8))
    memory = r.standard_normal((2, M, attn.kv.weight.shape[0]))
    memory_mask = None
    if mask:
        memory_mask = np.ones((2, 1, 1, M), bool)
        memory_mask[1, ..., M - 2:] = False
    y, c = attn.forward(x, memory, memory_mask)
    dx, dmem = attn.backward(r.standard_normal(y.shape), c)
    return {"y": y, "dx": dx, "dmem": dmem, **grads(attn)}


def s2s_cross(nf):
    r = rng(102)
    return cross_run(nf, nf.CrossAttention(8, 2, d_memory=6, bias=True, rng=r, dtype=F64), 103)


def s2s_cross_special(nf):
    r = rng(104)
    out = {f"gqa.{n}": v for n, v in cross_run(nf, nf.CrossAttention(8, 4, n_kv_heads=1, rng=r, dtype=F64),
                                                105, M=3, mask=False, accumulate=True).items()}
    return out


def dec_block_run(nf, config, seed, accumulate=False):
    from npformer.t17_seq2seq import build_decoder_block  # noqa: the copy under test
    r = rng(seed)
    block = randomize(build_decoder_block(config, r, F64), r, 0.4)
    if accumulate:
        prefill(block, r)
    x, memory = r.standard_normal((2, 3, 8)), r.standard_normal((2, 5, 8))
    memory_mask = np.ones((2, 1, 1, 5), bool)
    memory_mask[0, ..., 4] = False
    y, c = block.forward(x, memory, None, memory_mask)
    dx, dmem = block.backward(r.standard_normal(y.shape), c)
    return {"y": y, "dx": dx, "dmem": dmem, **grads(block)}


def s2s_block(nf):
    out = {}
    for prenorm in (True, False):
        res = dec_block_run(nf, nf.Seq2SeqConfig(prenorm=prenorm), 106)
        out.update({f"{prenorm}.{n}": v for n, v in res.items()})
    return out


def s2s_model_run(nf, config, seed, accumulate=False):
    r = rng(seed)
    model = randomize(nf.EncoderDecoder(config, r, F64), r, 0.3)
    if accumulate:
        prefill(model, r)
    src, tgt = r.integers(0, config.vocab_size, (2, 5)), r.integers(0, config.vocab_size, (2, 4))
    src_mask = np.ones((2, 5), bool)
    src_mask[1, 3:] = False
    tgt_mask = np.ones((2, 4), bool)
    tgt_mask[0, 3] = False
    logits, c = model.forward(src, tgt, src_mask, tgt_mask)
    d_memory = model.decode_backward(r.standard_normal(logits.shape), c.decoder)
    model.encoder.backward(d_memory, c.encoder)
    return {"logits": logits, "dmem": d_memory, **grads(model)}


def s2s_model(nf):
    return s2s_model_run(nf, nf.Seq2SeqConfig(), 107)


def s2s_model_special(nf):
    out = {f"deep.{n}": v for n, v in s2s_model_run(nf, nf.Seq2SeqConfig(n_decoder_layers=2, n_encoder_layers=2),
                                                     108, True).items()}
    out.update({f"bart.{n}": v for n, v in s2s_model_run(nf, nf.Seq2SeqConfig.bart(n_decoder_layers=2),
                                                          109).items()})
    out.update({f"untied.{n}": v for n, v in s2s_model_run(
        nf, nf.Seq2SeqConfig(tie_head=False, share_embeddings=False, logits_bias=True), 110).items()})
    return out


# -- 18 flash
def flash_run(nf, q, k, v, seed, **kw):
    r = rng(seed)
    out, c = nf.flash_attention_forward(q, k, v, **kw)
    dq, dk, dv = nf.flash_attention_backward(r.standard_normal(out.shape), c)
    return {"out": out, "lse": c.lse, "dq": dq, "dk": dk, "dv": dv}


def flash_basic(nf):
    q, k, v = qkv(111, N=5, M=5)
    q = 2 * q
    return flash_run(nf, q, k, v, 112, block_size=2)


def flash_causal(nf):
    q, k, v = qkv(113, N=6, M=6)
    return flash_run(nf, 2 * q, k, v, 114, causal=True, block_size=4)


def flash_special(nf):
    out = {}
    q, k, v = qkv(115, H=4, H_kv=2, N=3, M=7, Dv=4)
    res = flash_run(nf, 2 * q, k, v, 116, causal=True, window=3, scale=0.5, block_size=2)
    out.update({f"win.{n}": x for n, x in res.items()})
    q, k, v = qkv(117, N=4, M=6)
    mask = np.ones((2, 1, 1, 6), bool)
    mask[0, ..., :3] = False               # padding first: the first blocks have nothing to read
    mask[1] = False                        # a sequence with nothing to read at all
    res = flash_run(nf, 2 * q, k, v, 118, mask=mask, block_size=2)
    out.update({f"pad.{n}": x for n, x in res.items()})
    return out


ORDINARY, SPECIAL = False, True
SCENARIOS = {
    "softmax": [(sm_basic, ORDINARY), (sm_axis, SPECIAL), (sm_mask, SPECIAL), (sm_big, SPECIAL)],
    "activations": [(act_basic, ORDINARY), (act_edges, SPECIAL)],
    "linear": [(lin_fn, ORDINARY), (lin_module, ORDINARY), (lin_shapes, SPECIAL), (lin_accumulate, SPECIAL)],
    "embedding": [(emb_basic, ORDINARY), (emb_stream, ORDINARY), (emb_table, ORDINARY),
                  (emb_padding, SPECIAL), (emb_stream_variants, SPECIAL), (emb_table_odd, SPECIAL)],
    "attention": [(att_basic, ORDINARY), (att_causal, ORDINARY), (att_may_read, ORDINARY),
                  (att_special, SPECIAL), (att_window, SPECIAL)],
    "multi-head": [(mha_basic, ORDINARY), (mha_three, ORDINARY), (mha_gqa, SPECIAL), (mha_rope, SPECIAL),
                   (mha_flash, SPECIAL)],
    "rope": [(rope_half, ORDINARY), (rope_interleaved, ORDINARY), (rope_partial, SPECIAL)],
    "ffn": [(ffn_basic, ORDINARY), (ffn_gate, ORDINARY), (ffn_swiglu, ORDINARY)],
    "norm": [(norm_basic, ORDINARY), (norm_big_eps, ORDINARY), (norm_module_basic, ORDINARY),
             (norm_special, SPECIAL)],
    "block": [(block_pre, ORDINARY), (block_post, ORDINARY), (block_llama, ORDINARY), (block_special, SPECIAL)],
    "model": [(model_tied, ORDINARY), (model_llama, ORDINARY), (model_head, ORDINARY), (model_special, SPECIAL)],
    "loss": [(loss_logsm, ORDINARY), (loss_ce, ORDINARY), (loss_logsm_special, SPECIAL),
             (loss_ce_special, SPECIAL)],
    "optim": [(adam_basic, ORDINARY), (adam_first, ORDINARY), (adam_f32, ORDINARY)],
    "kv-cache": [(kv_grouped, ORDINARY), (kv_layer_basic, ORDINARY), (kv_decode, ORDINARY),
                 (kv_grouped_special, SPECIAL), (kv_layer_window, SPECIAL), (kv_decode_window, SPECIAL)],
    "moe": [(moe_basic, ORDINARY), (moe_kinds, ORDINARY), (moe_special, SPECIAL)],
    "encoder": [(enc_pool, ORDINARY), (enc_l2, ORDINARY), (enc_bert, ORDINARY), (enc_pool_empty, SPECIAL),
                (enc_l2_short, SPECIAL), (enc_special, SPECIAL)],
    "seq2seq": [(s2s_cross, ORDINARY), (s2s_block, ORDINARY), (s2s_model, ORDINARY),
                (s2s_cross_special, SPECIAL), (s2s_model_special, SPECIAL)],
    "flash": [(flash_basic, ORDINARY), (flash_causal, ORDINARY), (flash_special, SPECIAL)],
}
FLOAT32_SCENARIOS = {adam_f32}


# == comparing results ==================================================================
def relative_difference(a, b):
    """max |a - b| / max |b| over the finite entries; inf when shapes, types or NaN places differ."""
    if a is None or b is None:
        return 0.0 if a is None and b is None else math.inf
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return math.inf
    if a.dtype == object or b.dtype == object:
        return math.inf
    a, b = a.astype(np.float64), b.astype(np.float64)
    if a.size == 0:
        return 0.0
    same_nan = np.isnan(a) == np.isnan(b)
    same_inf = (np.isinf(a) == np.isinf(b)) & (~np.isinf(a) | (np.sign(a) == np.sign(b)))
    if not (same_nan.all() and same_inf.all()):
        return math.inf
    finite = np.isfinite(b)
    if not finite.any():
        return 0.0
    scale = max(float(np.max(np.abs(b[finite]))), 1e-30)
    return float(np.max(np.abs(a[finite] - b[finite]))) / scale


def compare(got, want):
    """The largest relative difference between two scenario results (inf for a missing output)."""
    if set(got) != set(want):
        return math.inf
    return max((relative_difference(got[n], want[n]) for n in want), default=0.0)


# == the package under test ==============================================================
class Sandbox:
    """A copy of npformer whose exercise files are the answer key's; one file edited at a time."""

    def __init__(self, root, key_dir, files):
        self.dir = os.path.join(root, "pkg")
        ignore = shutil.ignore_patterns("__pycache__", "mistakes", "cases", "claims", "verdict.py")
        shutil.copytree(os.path.join(ROOT, "npformer"), os.path.join(self.dir, "npformer"), ignore=ignore)
        self.key_text = {}
        for name in files:
            with open(os.path.join(key_dir, os.path.basename(name)), encoding="utf-8") as f:
                self.key_text[name] = f.read()
            self.write(name, self.key_text[name])
        sys.dont_write_bytecode = True
        sys.path.insert(0, self.dir)

    def write(self, name, text):
        with open(os.path.join(self.dir, "npformer", name), "w", encoding="utf-8") as f:
            f.write(text)

    def fresh(self):
        for module in [m for m in sys.modules if m == "npformer" or m.startswith("npformer.")]:
            del sys.modules[module]
        importlib.invalidate_caches()
        nf = importlib.import_module("npformer")
        expected = os.path.join(self.dir, "npformer", "__init__.py")
        if os.path.abspath(nf.__file__) != os.path.abspath(expected):
            raise RuntimeError(f"imported npformer from {nf.__file__}, not the sandbox")
        return nf

    def run(self, exercise, name=None, text=None):
        """{scenario: (result dict or None, error text or None)} with ``name`` holding ``text``."""
        if name is not None:
            self.write(name, text)
        try:
            nf = self.fresh()
            results = {}
            for scenario, _special in SCENARIOS[exercise]:
                try:
                    with warnings.catch_warnings(), np.errstate(all="ignore"):
                        warnings.simplefilter("ignore")
                        results[scenario.__name__] = (scenario(nf), None)
                except Exception as error:              # noqa: BLE001 - a mistake may raise
                    line = traceback.extract_tb(error.__traceback__)[-1]
                    results[scenario.__name__] = (None, f"{type(error).__name__}: {error} "
                                                        f"({os.path.basename(line.filename)}:{line.lineno})")
            return results
        finally:
            if name is not None:
                self.write(name, self.key_text[name])


# == the place of an edit ================================================================
def function_node(tree, qualname):
    """The FunctionDef of ``qualname`` ("Class.method" or "function") at the top of ``tree``."""
    body = tree.body
    parts = qualname.split(".")
    node = None
    for i, part in enumerate(parts):
        kinds = (ast.ClassDef,) if i < len(parts) - 1 else (ast.FunctionDef,)
        found = [n for n in body if isinstance(n, kinds) and n.name == part]
        if len(found) != 1:
            return None
        node = found[0]
        body = node.body
    return node


def span(text, node):
    """(start, end) character offsets of ``node``'s source lines, decorators included."""
    lines = text.splitlines(keepends=True)
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    start = sum(len(line) for line in lines[:first - 1])
    end = sum(len(line) for line in lines[:node.end_lineno])
    return start, end


def load_catalog():
    spec = importlib.util.spec_from_file_location("heldout_catalog",
                                                  os.path.join(ROOT, "npformer", "exercises", "catalog.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return {e.name: e for e in module.EXERCISES}


def place(entry, catalog, key_text, alternative):
    """(edited text, problems): where the entry lands and what the file becomes."""
    problems = []
    fields = ALTERNATIVE_FIELDS if alternative else MISTAKE_FIELDS
    missing = fields - set(entry)
    if missing:
        return None, [f"missing fields {sorted(missing)}"]
    # the exercise that holds the function (a set written under an earlier numbering names
    # exercises that have since merged or split, "multi-head" for one)
    spec = f"{entry['file']}:{entry['function']}"
    exercise = next((e for e in catalog.values() if spec in e.backward + e.forward), None)
    if exercise is None:
        return None, [f"{spec} is not one of the exercises' bodies"]
    if not alternative:
        kind = "backward" if spec in exercise.backward else "forward"
        if entry["kind"] != kind:
            problems.append(f"kind {entry['kind']!r}, but the catalog lists {spec} as a {kind} body")
        if entry["old"] == entry["new"]:
            problems.append("old and new are the same")
    text = key_text[entry["file"]]
    node = function_node(ast.parse(text), entry["function"])
    if node is None:
        return None, problems + [f"{entry['function']} not found in the key's {entry['file']}"]
    start, end = span(text, node)
    if alternative:
        new_text = text[:start] + entry["body"].rstrip("\n") + "\n" + text[end:]
    else:
        count = text.count(entry["old"])
        if count != 1:
            return None, problems + [f"old occurs {count} times in the key's {entry['file']}"]
        at = text.index(entry["old"])
        if not (start <= at and at + len(entry["old"]) <= end):
            return None, problems + [f"old is not inside {entry['function']}"]
        new_text = text[:at] + entry["new"] + text[at + len(entry["old"]):]
    try:
        tree = ast.parse(new_text)
        compile(new_text, entry["file"], "exec")
    except SyntaxError as error:
        return None, problems + [f"the edited file does not compile: {error}"]
    edited = function_node(tree, entry["function"])
    if edited is None:
        problems.append(f"the edited file has no {entry['function']} any more")
    elif ast.dump(edited) == ast.dump(node):
        problems.append("the edit leaves the function's code as it was")
    return new_text, problems


# == the rules on the whole set ============================================================
WITH_ALTERNATIVES = ("t03_softmax.py:softmax_backward", "t08_norm.py:layernorm_backward",
                     "t08_norm.py:rmsnorm_backward", "t04_attention.py:attention_backward",
                     "t04_attention.py:grouped_attention_backward", "t05_rope.py:Rotary.backward",
                     "t11_loss.py:cross_entropy_backward", "t11_loss.py:log_softmax_backward",
                     "t02_linear.py:linear_backward", "t01_embedding.py:Embedding.backward",
                     "t04_attention.py:MultiHeadAttention.backward", "t19_optim.py:adamw_update")


def set_rules(mistakes, alternatives, catalog, minimums):
    """The size and spread of the set: enough mistakes, every exercise with bodies covered,
    about two thirds backward, two alternatives or more for each function that needs them.
    ``minimums``: (mistakes, mistakes per exercise, (least, most) backward share)."""
    least, per_exercise, share_range = minimums
    failures = []
    if len(mistakes) < least:
        failures.append(f"the set: {len(mistakes)} mistakes, expected at least {least}")
    holder = {spec: e.name for e in catalog.values() for spec in e.backward + e.forward}
    counts = collections.Counter(holder.get(f"{e.get('file')}:{e.get('function')}") for e in mistakes)
    for name, exercise in catalog.items():
        if (exercise.backward or exercise.forward) and counts[name] < per_exercise:
            failures.append(f"the set: {counts[name]} mistakes for {name}, expected at least {per_exercise}")
    share = sum(e.get("kind") == "backward" for e in mistakes) / max(len(mistakes), 1)
    if not share_range[0] <= share <= share_range[1]:
        failures.append(f"the set: {share:.0%} of the mistakes are backward, expected about two thirds")
    for entry in mistakes:
        what = entry.get("what", "")
        if not what.strip() or not what.rstrip().endswith(".") or entry.get("note") == "":
            failures.append(f"{entry.get('id')}: 'what' must be one sentence ending in a period, "
                            f"a note non-empty when present")
    have = collections.Counter(f"{a.get('file')}:{a.get('function')}" for a in alternatives)
    for spec in WITH_ALTERNATIVES:
        if have[spec] < 2:
            failures.append(f"the set: {have[spec]} alternatives for {spec}, expected at least 2")
    return failures


# == main ================================================================================
def main(argv, here, minimums):
    """Check the held-out set in the folder ``here`` (its mistakes.json and alternatives.json)."""
    set_name = os.path.basename(here)
    verbose = "-v" in argv
    only = {a for a in argv if not a.startswith("-")}
    os.environ["NPFORMER_TRACK"] = "plain"
    with open(os.path.join(here, "mistakes.json"), encoding="utf-8") as f:
        mistakes = json.load(f)
    with open(os.path.join(here, "alternatives.json"), encoding="utf-8") as f:
        alternatives = json.load(f)
    catalog = load_catalog()
    failures = set_rules(mistakes, alternatives, catalog, minimums)
    ids = [e.get("id") for e in mistakes + alternatives]
    for duplicate in sorted({i for i in ids if ids.count(i) > 1}):
        failures.append(f"{duplicate}: the id is used more than once")

    tmp = tempfile.mkdtemp(prefix=f"{set_name}-")
    try:
        key_dir = os.path.join(tmp, "key")
        env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
        subprocess.run([sys.executable, "-m", "npformer", "exercises", key_dir, "--solutions", "--forward"],
                       cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(key_dir, "npformer-workspace.json"), encoding="utf-8") as f:
            files = json.load(f)["files"]
        sandbox = Sandbox(tmp, key_dir, files)

        reference = {name: sandbox.run(name) for name in SCENARIOS}
        for name, results in reference.items():
            for scenario, (_, error) in results.items():
                if error:
                    failures.append(f"the key itself fails {name}/{scenario}: {error}")

        counts = collections.Counter()
        kinds = collections.Counter()
        noted = only_special = 0
        for alternative, entries in ((False, mistakes), (True, alternatives)):
            for entry in entries:
                if only and entry.get("id") not in only:
                    continue
                label = entry.get("id", "?")
                text, problems = place(entry, catalog, sandbox.key_text, alternative)
                if text is not None and entry.get("file") in sandbox.key_text:
                    exercise = entry["exercise"]
                    results = sandbox.run(exercise, entry["file"], text)
                    special = dict((s.__name__, sp) for s, sp in SCENARIOS[exercise])
                    differs = {}
                    for scenario, (got, error) in results.items():
                        want = reference[exercise][scenario][0]
                        if error:
                            if alternative or not special[scenario]:
                                problems.append(f"raises in {scenario}: {error}")
                            differs[scenario] = math.inf
                            continue
                        differs[scenario] = compare(got, want)
                    if alternative:
                        if verbose:
                            print(f"  {label}: largest difference {max(differs.values()):.1e}")
                        for scenario, diff in differs.items():
                            f32 = scenario in {s.__name__ for s in FLOAT32_SCENARIOS}
                            if diff > (SAME_F32 if f32 else SAME) and not any(
                                    p.startswith(f"raises in {scenario}") for p in problems):
                                problems.append(f"differs from the key in {scenario} by {diff:.2e}")
                    else:
                        shown = {s for s, d in differs.items() if d > DIFFERENT}
                        if not shown:
                            problems.append("gives the key's numbers in every scenario "
                                            f"(largest difference {max(differs.values()):.1e})")
                        elif all(special[s] for s in shown):
                            only_special += 1
                            if not entry.get("note"):
                                problems.append(f"shows only in special scenarios ({', '.join(sorted(shown))}) "
                                                "and has no note")
                        if entry.get("note"):
                            noted += 1
                        if verbose:
                            print(f"  {label}: differs in {', '.join(sorted(shown)) or 'nothing'}")
                if not alternative:
                    counts[entry.get("exercise")] += 1
                    kinds[entry.get("kind")] += 1
                for problem in problems:
                    failures.append(f"{label}: {problem}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    for failure in failures:
        print("FAIL", failure)
    n_alt_functions = len({(a["file"], a["function"]) for a in alternatives})
    per_exercise = " ".join(f"{name} {counts[name]}" for name in SCENARIOS)
    status = "ok" if not failures else f"{len(failures)} problems"
    print(f"{set_name}: {sum(counts.values())} mistakes ({kinds['backward']} backward, {kinds['forward']} forward; "
          f"{noted} with a note, {only_special} shown only by special inputs; per exercise: {per_exercise}), "
          f"{len(alternatives) if not only else '-'} alternatives for {n_alt_functions} functions: {status}")
    return 0 if not failures else 1
