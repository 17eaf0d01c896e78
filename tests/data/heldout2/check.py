"""Checks the second held-out set of learners' mistakes and correct alternatives.

Run from the root of the repository:

    python tests/data/heldout2/check.py [-v] [--keep]

(-v: one line per entry, with the inputs each mistake shows on; --keep: keep the temporary
directory with the answer key and the edited files.)

It writes an answer key (``npformer exercises KEY --solutions --forward``) to a temporary
directory, then for every entry of ``mistakes.json``:

- the exercise names the function (``file:function`` in the catalogue) with the right kind;
- ``old`` occurs exactly once in the key's file and lies inside that function;
- the edited file compiles and imports;
- the edit runs without raising on the ordinary inputs below, and changes some number
  (outputs or gradients, float64) on some input; when it changes numbers only on special
  inputs (padding, partial rotary, several layers ...) the entry must carry a ``note``, and
  a note saying "only ..." must not be contradicted by an ordinary input;

and for every entry of ``alternatives.json``:

- the body replaces the whole ``def`` of the named function, compiles and imports;
- it is written differently from the key's body;
- every output and gradient equals the key's to 1e-10 relative (float64) on every input
  below (masks, padding, fully masked rows, ignored targets, GQA ...), and keeps float32
  as float32 (1e-5 relative there).

Each edited file is imported as a sibling module of npformer's own (``npformer._heldout2_*``),
so its relative imports reach npformer's code for everything else. The inputs are fixed
and seeded; every module is float64 with random parameters (gains != 1).
"""
from __future__ import annotations

import ast
import atexit
import importlib.util
import json
import subprocess
import sys
import tempfile
import shutil
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path.cwd()
HERE = Path(__file__).resolve().parent
if not (ROOT / "npformer" / "__init__.py").exists():
    sys.exit("check.py: run it from the repository root (python tests/data/heldout2/check.py)")
sys.path.insert(0, str(ROOT))

from npformer.exercises.catalog import BY_NAME                           # noqa: E402
from npformer.t04_attention import MultiHeadAttention, padding_mask      # noqa: E402
from npformer.t05_rope import Rotary                                     # noqa: E402
from npformer.t08_norm import LayerNorm                                  # noqa: E402

F64, F32 = np.float64, np.float32
MISTAKE_CHANGE = 1e-8      # a mistake must change some number by more than this (relative)
ALT_TOL64, ALT_TOL32 = 1e-10, 1e-5
VERBOSE = "-v" in sys.argv[1:]


# -- inputs ------------------------------------------------------------------------------
def R(seed):
    return np.random.default_rng(seed)


def normal(seed, *shape, scale=1.0):
    return R(seed).standard_normal(shape) * scale


def randomize(module, seed):
    """Random non-trivial parameters: gains near 1 (not 1), weights of unit fan-in scale."""
    r = R(seed)
    for name, p in module.named_parameters():
        if name.split(".")[-1] == "gamma":
            p.data[...] = 1 + 0.3 * r.standard_normal(p.shape)
        elif p.data.ndim >= 2:
            p.data[...] = r.standard_normal(p.shape) / np.sqrt(p.shape[0])
        else:
            p.data[...] = 0.3 * r.standard_normal(p.shape)
    return module


def prime(module, seed):
    """Gradients that already hold something (a layer used before, grads not zeroed)."""
    r = R(seed)
    for _, p in module.named_parameters():
        p.grad[...] = r.standard_normal(p.shape)


def grads(module):
    return {"grad." + name: p.grad.copy() for name, p in module.named_parameters()}


@dataclass
class Config:
    name: str
    special: str | None          # None: an ordinary input every grader tries
    run: object                  # module -> {name: array, scalar or None}
    float32: bool = False        # compared at float32 precision (alternatives only)


CONFIGS = {}


# softmax -------------------------------------------------------------------------------
def p_softmax(mod, x, axis=-1, mask=None):
    y, cache = mod.softmax_forward(x, axis, mask)
    d = normal(9, *y.shape).astype(x.dtype)
    return {"y": y, "d_x": mod.softmax_backward(d, cache)}


SX = normal(1, 2, 3, 5, scale=2)
SMASK = R(2).random((2, 3, 5)) > 0.4
SMASK[..., 0] = True
SFULL = SMASK.copy()
SFULL[0, 1] = False
CONFIGS["t03_softmax.py"] = [
    Config("rows", None, lambda m: p_softmax(m, SX)),
    Config("mask", None, lambda m: p_softmax(m, SX, mask=SMASK)),
    Config("fully masked row", "fully masked rows", lambda m: p_softmax(m, SX, mask=SFULL)),
    Config("axis 1", "softmax over an axis other than the last", lambda m: p_softmax(m, SX, axis=1)),
    Config("axis 0, mask", "softmax over an axis other than the last",
           lambda m: p_softmax(m, SX, axis=0, mask=SMASK)),
    Config("huge scores", "huge scores", lambda m: p_softmax(m, SX * 1000)),
    Config("float32", "float32", lambda m: p_softmax(m, SX.astype(F32), mask=SMASK), True),
]


# activations -----------------------------------------------------------------------------
def p_activations(mod, x):
    out = {}
    for i, name in enumerate(("relu", "gelu", "gelu_tanh", "silu")):
        y, cache = getattr(mod, name + "_forward")(x)
        d = normal(10 + i, *x.shape).astype(x.dtype)
        out[name] = y
        out["d_" + name] = getattr(mod, name + "_backward")(d, cache)
    return out


AX = normal(3, 3, 7, scale=2)
AZ = AX.copy()
AZ[0, :3] = 0.0
CONFIGS["t06_activations.py"] = [
    Config("x", None, lambda m: p_activations(m, AX)),
    Config("exact zeros", "inputs exactly 0", lambda m: p_activations(m, AZ)),
    Config("large x", "large inputs", lambda m: p_activations(m, AX * 10)),
    Config("float32", "float32", lambda m: p_activations(m, AX.astype(F32)), True),
]


# linear -------------------------------------------------------------------------------------
def p_linear(mod, x, bias=True, primed=False):
    w = normal(20, x.shape[-1], 5).astype(x.dtype)
    b = normal(21, 5).astype(x.dtype) if bias else None
    y, cache = mod.linear_forward(x, w, b)
    d = normal(22, *y.shape).astype(x.dtype)
    d_x, d_w, d_b = mod.linear_backward(d, cache)
    out = {"y": y, "d_x": d_x, "d_w": d_w, "d_b": d_b}
    layer = randomize(mod.Linear(x.shape[-1], 5, bias=bias, rng=R(0), dtype=x.dtype), 23)
    if primed:
        prime(layer, 24)
    y2, cache2 = layer.forward(x)
    out["layer.y"] = y2
    out["layer.d_x"] = layer.backward(d, cache2)
    out.update(grads(layer))
    return out


LX = normal(25, 2, 3, 4)
CONFIGS["t02_linear.py"] = [
    Config("[B, N, d] with bias", None, lambda m: p_linear(m, LX)),
    Config("no bias", None, lambda m: p_linear(m, LX, bias=False)),
    Config("2-D", "2-D inputs", lambda m: p_linear(m, LX[0])),
    Config("accumulate", "gradients already non-zero", lambda m: p_linear(m, LX, primed=True)),
    Config("float32", "float32", lambda m: p_linear(m, LX.astype(F32)), True),
]


# embedding -----------------------------------------------------------------------------------
IDS = np.array([[1, 3, 1, 0, 5], [3, 3, 6, 2, 0]])


def p_embedding(mod, padding_idx=None, primed=False):
    emb = randomize(mod.Embedding(7, 4, R(0), dtype=F64, padding_idx=padding_idx), 30)
    if primed:
        prime(emb, 31)
    out, cache = emb.forward(IDS)
    returned = emb.backward(normal(32, *out.shape), cache)
    return {"out": out, "returned": returned, **grads(emb)}


def p_embeddings(mod, padding_idx=None, bert=False, positions=None):
    tokens = mod.Embedding(7, 4, R(0), dtype=F64, padding_idx=padding_idx)
    table = mod.LearnedPositions(6, 4, R(1), dtype=F64)
    segments = mod.Embedding(2, 4, R(2), dtype=F64) if bert else None
    norm = LayerNorm(4, dtype=F64) if bert else None
    embed = randomize(mod.Embeddings(tokens, table, segments, norm, scale=2.0 if bert else 1.0), 33)
    segment_ids = np.array([[0, 0, 1, 1, 1], [0, 1, 1, 1, 1]]) if bert else None
    x, cache = embed.forward(IDS, positions, segment_ids)
    returned = embed.backward(normal(34, *x.shape), cache)
    return {"x": x, "returned": returned, **{"embeddings." + k: v for k, v in grads(embed).items()}}


def p_sinusoid(mod, d):
    rows, _ = mod.SinusoidalPositions(10, d, dtype=F64).forward(np.arange(4, 9))
    return {"table": mod.sinusoid_table(12, d), "table.base100": mod.sinusoid_table(12, d, 100.0),
            "rows": rows}


CONFIGS["t01_embedding.py"] = [
    Config("lookups", None, lambda m: {**p_embedding(m), **p_embeddings(m), **p_sinusoid(m, 6)}),
    Config("padding_idx", "padding_idx set",
           lambda m: {**p_embedding(m, padding_idx=0), **p_embeddings(m, padding_idx=0)}),
    Config("padding_idx, primed", "padding_idx set and a gradient already in the table",
           lambda m: p_embedding(m, padding_idx=0, primed=True)),
    Config("BERT-style", "embedding scale, segments and a norm after the embeddings",
           lambda m: p_embeddings(m, bert=True)),
    Config("positions [B, N]", "per-sequence positions [B, N]",
           lambda m: p_embeddings(m, positions=np.array([[0, 1, 2, 3, 4], [2, 3, 4, 5, 0]]))),
    Config("odd width", "an odd width d", lambda m: p_sinusoid(m, 5)),
]


# attention, multi-head, grouped-query (t04) -------------------------------------------------------
def p_attention(mod, q, k, v, mask=None, causal=False, window=None, scale=None, grouped=False):
    forward = mod.grouped_attention_forward if grouped else mod.attention_forward
    backward = mod.grouped_attention_backward if grouped else mod.attention_backward
    out, cache = forward(q, k, v, mask, scale, causal, window)
    d = normal(40, *out.shape).astype(q.dtype)
    d_q, d_k, d_v = backward(d, cache)
    return {"out": out, "weights": cache.weights, "d_q": d_q, "d_k": d_k, "d_v": d_v}


def p_may_read(mod, window=None):
    return {"may_read": mod.may_read(np.arange(6)[:, None], np.arange(6)[None, :], window),
            "may_read.last3": mod.may_read(np.arange(3, 6)[:, None], np.arange(6)[None, :], window)}


def p_mha(mod, n_heads=2, n_kv_heads=None, rope=False, mask=None, bias=False, primed=False):
    attn = mod.MultiHeadAttention(8, n_heads, n_kv_heads, bias=bias,
                                  rope=Rotary(8 // n_heads) if rope else None,
                                  rng=R(0), dtype=F64, causal=True)
    randomize(attn, 41)
    if primed:
        prime(attn, 42)
    x = normal(43, 2, 4, 8)
    y, cache = attn.forward(x, mask)
    d_x = attn.backward(normal(44, *y.shape), cache)
    return {"mha.y": y, "mha.d_x": d_x, **grads(attn)}


Q, K, V = normal(45, 2, 2, 4, 3, scale=1.5), normal(46, 2, 2, 4, 3, scale=1.5), normal(47, 2, 2, 4, 3)
QG, KG, VG = normal(48, 2, 4, 3, 3, scale=1.5), normal(49, 2, 2, 3, 3, scale=1.5), normal(50, 2, 2, 3, 3)
KPAD = np.array([[True, True, True, True], [True, True, False, False]])[:, None, None, :]
KNONE = np.array([[False] * 4, [True, False, True, True]])[:, None, None, :]
GPAD = np.array([[False, True, True], [True, True, True]])[:, None, None, :]
CONFIGS["t04_attention.py"] = [
    Config("plain", None, lambda m: {**p_attention(m, Q, K, V), **p_may_read(m)}),
    Config("causal", None, lambda m: p_attention(m, Q, K, V, causal=True)),
    Config("padding", "padding mask", lambda m: p_attention(m, Q, K, V, mask=KPAD, causal=True)),
    Config("fully masked rows", "fully masked rows", lambda m: p_attention(m, Q, K, V, mask=KNONE)),
    Config("window", "sliding window",
           lambda m: {**p_attention(m, Q, K, V, causal=True, window=2), **p_may_read(m, 2)}),
    Config("N != M", "fewer queries than keys (N != M)",
           lambda m: p_attention(m, Q[:, :, :2], normal(51, 2, 2, 5, 3), normal(52, 2, 2, 5, 3),
                                 causal=True)),
    Config("explicit scale", "an explicit scale", lambda m: p_attention(m, Q, K, V, scale=0.3)),
    Config("GQA", None, lambda m: p_attention(m, QG, KG, VG, causal=True, grouped=True)),
    Config("MQA", None, lambda m: p_attention(m, QG, KG[:, :1], VG[:, :1], grouped=True)),
    Config("grouped, H_kv = H", None, lambda m: p_attention(m, Q, K, V, causal=True, grouped=True)),
    Config("GQA, padding and window", "padding mask and sliding window",
           lambda m: p_attention(m, QG, KG, VG, mask=GPAD, causal=True, window=2, grouped=True)),
    Config("MHA", None, lambda m: p_mha(m)),
    Config("MHA, bias, padding", "padding mask",
           lambda m: p_mha(m, bias=True, mask=padding_mask(np.array([4, 2]), 4))),
    Config("MHA, GQA", "grouped-query attention inside MultiHeadAttention",
           lambda m: p_mha(m, n_heads=4, n_kv_heads=2)),
    Config("MHA, RoPE", "RoPE", lambda m: p_mha(m, rope=True)),
    Config("MHA, accumulate", "gradients already non-zero", lambda m: p_mha(m, primed=True)),
    Config("float32", "float32",
           lambda m: {**p_attention(m, Q.astype(F32), K.astype(F32), V.astype(F32), mask=KNONE),
                      **{"g." + k: v for k, v in p_attention(m, QG.astype(F32), KG.astype(F32),
                                                             VG.astype(F32), causal=True,
                                                             grouped=True).items()}}, True),
]


# rope -----------------------------------------------------------------------------------------
def p_rope(mod, head_dim=6, layout="half", fraction=1.0, positions=None, dtype=F64):
    rotary = mod.Rotary(head_dim, layout=layout, fraction=fraction)
    x = normal(60, 2, 2, 5, head_dim).astype(dtype)
    positions = np.arange(2, 7) if positions is None else positions
    y, cache = rotary.forward(x, positions)
    d_x = rotary.backward(normal(61, *y.shape).astype(dtype), cache)
    return {"y": y, "d_x": d_x, "angles": rotary.angles(positions)}


BPOS = np.array([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]])
CONFIGS["t05_rope.py"] = [
    Config("half", None, lambda m: p_rope(m)),
    Config("interleaved", "interleaved layout", lambda m: p_rope(m, layout="interleaved")),
    Config("partial", "partial rotary (fraction < 1)", lambda m: p_rope(m, 8, fraction=0.5)),
    Config("partial interleaved", "partial rotary, interleaved layout",
           lambda m: p_rope(m, 8, "interleaved", 0.5)),
    Config("positions [B, N]", "per-sequence positions [B, N]", lambda m: p_rope(m, positions=BPOS)),
    Config("float32", "float32", lambda m: p_rope(m, 8, "interleaved", 0.5, dtype=F32), True),
]


# ffn ---------------------------------------------------------------------------------------------
def p_gate(mod, dtype=F64):
    g, u = normal(70, 3, 7, scale=2).astype(dtype), normal(71, 3, 7).astype(dtype)
    h, cache = mod.swiglu_gate_forward(g, u)
    d_g, d_u = mod.swiglu_gate_backward(normal(72, *h.shape).astype(dtype), cache)
    return {"gate.h": h, "gate.d_g": d_g, "gate.d_u": d_u}


def p_ffn(mod, activation="gelu", primed=False):
    ffn = randomize(mod.FFN(6, hidden=10, activation=activation, rng=R(0), dtype=F64), 73)
    if primed:
        prime(ffn, 74)
    x = normal(75, 2, 3, 6)
    y, cache = ffn.forward(x)
    d_x = ffn.backward(normal(76, *y.shape), cache)
    return {"ffn.y": y, "ffn.d_x": d_x, **{"ffn." + k: v for k, v in grads(ffn).items()}}


def p_swiglu(mod, primed=False):
    net = randomize(mod.SwiGLU(6, hidden=10, rng=R(0), dtype=F64), 77)
    if primed:
        prime(net, 78)
    x = normal(79, 2, 3, 6)
    y, cache = net.forward(x)
    d_x = net.backward(normal(80, *y.shape), cache)
    return {"swiglu.y": y, "swiglu.d_x": d_x, **{"swiglu." + k: v for k, v in grads(net).items()}}


CONFIGS["t07_ffn.py"] = [
    Config("GELU FFN, gate, SwiGLU", None, lambda m: {**p_ffn(m), **p_gate(m), **p_swiglu(m)}),
    Config("ReLU FFN", "an activation other than GELU", lambda m: p_ffn(m, "relu")),
    Config("tanh-GELU FFN", "an activation other than GELU", lambda m: p_ffn(m, "gelu_tanh")),
    Config("accumulate", "gradients already non-zero",
           lambda m: {**p_ffn(m, primed=True), **p_swiglu(m, primed=True)}),
    Config("float32", "float32", lambda m: p_gate(m, F32), True),
]


# norm ----------------------------------------------------------------------------------------------
def p_norm_functions(mod, x):
    d = x.shape[-1]
    gamma, beta = (1 + 0.3 * normal(90, d)).astype(x.dtype), (0.3 * normal(91, d)).astype(x.dtype)
    dy = normal(92, *x.shape).astype(x.dtype)
    y, cache = mod.layernorm_forward(x, gamma, beta)
    d_x, d_gamma, d_beta = mod.layernorm_backward(dy, cache)
    y2, cache2 = mod.rmsnorm_forward(x, gamma)
    d_x2, d_gamma2 = mod.rmsnorm_backward(dy, cache2)
    return {"ln.y": y, "ln.d_x": d_x, "ln.d_gamma": d_gamma, "ln.d_beta": d_beta,
            "rms.y": y2, "rms.d_x": d_x2, "rms.d_gamma": d_gamma2}


def p_norm_modules(mod, x, primed=False):
    out = {}
    for name, cls in (("LayerNorm", mod.LayerNorm), ("RMSNorm", mod.RMSNorm)):
        norm = randomize(cls(x.shape[-1], dtype=F64), 93)
        if primed:
            prime(norm, 94)
        y, cache = norm.forward(x)
        out[name + ".y"] = y
        out[name + ".d_x"] = norm.backward(normal(95, *y.shape), cache)
        out.update({name + "." + k: v for k, v in grads(norm).items()})
    return out


NX = normal(96, 2, 3, 6, scale=1.5) + 0.5
CONFIGS["t08_norm.py"] = [
    Config("[B, N, d]", None, lambda m: {**p_norm_functions(m, NX), **p_norm_modules(m, NX)}),
    Config("2-D", "2-D inputs", lambda m: {**p_norm_functions(m, NX[0]), **p_norm_modules(m, NX[0])}),
    Config("tiny variance", "rows with a tiny variance",
           lambda m: p_norm_functions(m, 3 + 1e-3 * normal(97, 2, 3, 6))),
    Config("accumulate", "gradients already non-zero", lambda m: p_norm_modules(m, NX, primed=True)),
    Config("float32", "float32", lambda m: p_norm_functions(m, NX.astype(F32)), True),
]


# block -------------------------------------------------------------------------------------------------
def p_block(mod, prenorm=True, mask=None, primed=False, **fields):
    config = mod.BlockConfig(**{**dict(d_model=8, n_heads=2, ffn_hidden=12, prenorm=prenorm), **fields})
    block = randomize(mod.build_block(config, R(0), F64), 100)
    if primed:
        prime(block, 101)
    x = normal(102, 2, 4, 8)
    y, cache = block.forward(x, mask)
    d_x = block.backward(normal(103, *y.shape), cache)
    return {"y": y, "d_x": d_x, **grads(block)}


CONFIGS["t09_block.py"] = [
    Config("Pre-Norm", None, lambda m: p_block(m)),
    Config("Post-Norm", None, lambda m: p_block(m, prenorm=False)),
    Config("Pre-Norm, RMSNorm, SwiGLU, RoPE, GQA", None,
           lambda m: p_block(m, norm="rmsnorm", ffn="swiglu", rope=True, n_heads=4, n_kv_heads=2)),
    Config("padding", "padding mask",
           lambda m: {**p_block(m, mask=padding_mask(np.array([4, 3]), 4)),
                      **{"post." + k: v for k, v in p_block(m, False, padding_mask(np.array([4, 3]),
                                                                                   4)).items()}}),
    Config("accumulate", "gradients already non-zero",
           lambda m: {**p_block(m, primed=True),
                      **{"post." + k: v for k, v in p_block(m, False, primed=True).items()}}),
]


# model ----------------------------------------------------------------------------------------------------
def p_decoder(mod, key_mask=None, primed=False, **fields):
    config = mod.DecoderConfig(**{**dict(vocab_size=11, d_model=8, n_heads=2, max_len=8), **fields})
    model = randomize(mod.DecoderLM(config, R(0), F64), 110)
    if primed:
        prime(model, 111)
    ids = R(112).integers(0, 11, (2, 5))
    logits, cache = model.forward(ids, key_mask)
    returned = model.backward(normal(113, *logits.shape), cache)
    return {"logits": logits, "aux": cache.aux_loss, "returned": returned, **grads(model)}


CONFIGS["t10_model.py"] = [
    Config("untied", None, lambda m: p_decoder(m)),
    Config("tied (GPT-2)", None, lambda m: p_decoder(m, tie_embeddings=True)),
    Config("two layers", "several layers", lambda m: p_decoder(m, n_layers=2, tie_embeddings=True)),
    Config("pooled MoE, two layers", "MoE FFNs, pooled router loss, several layers",
           lambda m: p_decoder(m, n_layers=2, n_experts=4, top_k=2, ffn="swiglu",
                               moe_aux_objective="pooled", moe_aux_weight=0.1)),
    Config("padding", "padding (key_mask)",
           lambda m: p_decoder(m, key_mask=np.array([[True] * 5, [True, True, True, False, False]]))),
    Config("accumulate", "gradients already non-zero",
           lambda m: p_decoder(m, tie_embeddings=True, primed=True)),
]


# loss -------------------------------------------------------------------------------------------------------
def p_loss(mod, logits, targets, d_loss=0.7):
    y, cache = mod.log_softmax_forward(logits)
    d_x = mod.log_softmax_backward(normal(120, *y.shape).astype(logits.dtype), cache)
    loss, ce_cache = mod.cross_entropy_forward(logits, targets)
    d_logits, none = mod.cross_entropy_backward(d_loss, ce_cache)
    return {"log_probs": y, "d_x": d_x, "loss": loss, "d_logits": d_logits, "none": none}


CL = normal(121, 2, 4, 7, scale=2)
CT = R(122).integers(0, 7, (2, 4))
CTI = CT.copy()
CTI[0, 1] = CTI[1, 3] = CTI[1, 0] = -100
CONFIGS["t11_loss.py"] = [
    Config("targets", None, lambda m: p_loss(m, CL, CT)),
    Config("ignored targets", "ignored targets", lambda m: p_loss(m, CL, CTI)),
    Config("all ignored", "every target ignored", lambda m: p_loss(m, CL, np.full_like(CT, -100))),
    Config("huge logits", "huge logits", lambda m: p_loss(m, CL * 1000, CT)),
    Config("float32", "float32", lambda m: p_loss(m, CL.astype(F32), CTI), True),
]


# optim -----------------------------------------------------------------------------------------------------
def p_adamw(mod, steps=3, weight_decay=0.1, lr=0.01, dtype=F64):
    data = normal(130, 3, 4).astype(dtype)
    m, v = np.zeros_like(data), np.zeros_like(data)
    out = {}
    for step in range(1, steps + 1):
        grad = (normal(130 + step, 3, 4) * 10.0 ** R(140 + step).uniform(-4, 0, (3, 4))).astype(dtype)
        data, m, v = mod.adamw_update(data, grad, m, v, step, lr, (0.9, 0.999), 1e-8, weight_decay)
        data, m, v = np.array(data), np.array(m), np.array(v)
        out.update({f"data.{step}": data, f"m.{step}": m, f"v.{step}": v})
    return out


CONFIGS["t19_optim.py"] = [
    Config("three steps", None, lambda m: p_adamw(m)),
    Config("large lr", None, lambda m: p_adamw(m, steps=2, lr=0.1, weight_decay=0.5)),
    Config("first step", "the first step only", lambda m: p_adamw(m, steps=1)),
    Config("no decay", "weight_decay = 0", lambda m: p_adamw(m, weight_decay=0.0)),
    Config("float32", "float32", lambda m: p_adamw(m, dtype=F32), True),
]


# kv cache --------------------------------------------------------------------------------------------------
def p_decode(mod, n_heads=2, n_kv_heads=None, window=None, rope=False, chunks=(3, 1, 1), lengths=None):
    attn = MultiHeadAttention(8, n_heads, n_kv_heads, window=window, rng=R(0), dtype=F64,
                              rope=Rotary(8 // n_heads) if rope else None, causal=True)
    randomize(attn, 150)
    cache = mod.KVCache(1, 2, n_kv_heads or n_heads, 8, 8 // n_heads, F64)
    x = normal(151, 2, sum(chunks), 8)
    real = None if lengths is None else np.arange(sum(chunks))[None, :] >= np.asarray(lengths)[:, None]
    out, start = {}, 0
    for i, n in enumerate(chunks):
        mask = None if real is None else padding_mask(key_mask=real[:, :start + n])
        y, _ = attn.forward(x[:, start:start + n], mask, None, cache.layers[0])
        cache.advance(n)
        out[f"y.{i}"] = y
        start += n
    out["cache.k"], out["cache.v"] = cache.k[:, :, :, :start].copy(), cache.v[:, :, :, :start].copy()
    return out


CONFIGS["t13_kv_cache.py"] = [
    Config("decode", None, lambda m: p_decode(m)),
    Config("decode, GQA", None, lambda m: p_decode(m, n_heads=4, n_kv_heads=2)),
    Config("decode, RoPE", None, lambda m: p_decode(m, rope=True, chunks=(2, 1, 2))),
    Config("window", "sliding window", lambda m: p_decode(m, window=2)),
    Config("window, long prefill", "sliding window", lambda m: p_decode(m, window=2, chunks=(4, 1, 2))),
    Config("window, left padding", "sliding window and padding",
           lambda m: p_decode(m, window=3, chunks=(3, 1, 1), lengths=[0, 2])),
]


# moe --------------------------------------------------------------------------------------------------------
def p_moe(mod, expert="swiglu", top_k=2, token_mask=None, d_mean_probs=None, bias=False, primed=False):
    moe = randomize(mod.MoE(6, 4, top_k=top_k, hidden=8, expert=expert, bias=bias, aux_weight=0.1,
                            rng=R(0), dtype=F64), 160)
    if primed:
        prime(moe, 161)
    x = normal(162, 2, 5, 6)
    y, cache = moe.forward(x, token_mask)
    d_x = moe.backward(normal(163, *y.shape), cache, d_mean_probs=d_mean_probs)
    return {"y": y, "aux": cache.aux_loss, "load": cache.load, "mean_probs": cache.mean_probs,
            "d_x": d_x, **grads(moe)}


CONFIGS["t14_moe.py"] = [
    Config("SwiGLU experts, top-2", None, lambda m: p_moe(m)),
    Config("GELU experts, top-1", None, lambda m: p_moe(m, "gelu", 1)),
    Config("ReLU experts with bias, top-3", None, lambda m: p_moe(m, "relu", 3, bias=True)),
    Config("token mask", "padding (a token_mask)",
           lambda m: p_moe(m, token_mask=np.array([[True] * 5, [True, True, False, False, False]]))),
    Config("d_mean_probs", "the pooled objective's d_mean_probs",
           lambda m: p_moe(m, d_mean_probs=normal(164, 4))),
    Config("accumulate", "gradients already non-zero", lambda m: p_moe(m, primed=True)),
]


# encoder ----------------------------------------------------------------------------------------------------
def p_pool(mod, key_mask=None):
    states = normal(170, 3, 4, 5)
    pooled, cache = mod.mean_pool_forward(states, key_mask)
    return {"pooled": pooled, "pool.d": mod.mean_pool_backward(normal(171, *pooled.shape), cache)}


def p_l2(mod, x):
    unit, cache = mod.l2_normalize_forward(x)
    return {"unit": unit, "l2.d": mod.l2_normalize_backward(normal(172, *x.shape), cache)}


def p_encoder(mod, key_mask=None, **fields):
    config = mod.EncoderConfig(**{**dict(vocab_size=11, d_model=8, n_heads=2, max_len=8), **fields})
    encoder = randomize(mod.Encoder(config, R(0), F64), 173)
    ids = R(174).integers(0, 11, (2, 5))
    states, cache = encoder.forward(ids, key_mask)
    returned = encoder.backward(normal(175, *states.shape), cache)
    return {"states": states, "returned": returned, **grads(encoder)}


EMASK = np.array([[True, True, True, False], [True, False, False, False], [False] * 4])
TINY = normal(176, 3, 5)
TINY[1] *= 5e-13 / np.linalg.norm(TINY[1])
TINY[2] = 0.0
CONFIGS["t15_encoder.py"] = [
    Config("pool, normalise, encoder", None,
           lambda m: {**p_pool(m), **p_l2(m, normal(177, 3, 5)), **p_encoder(m)}),
    Config("padding", "padding (a key_mask)",
           lambda m: {**p_pool(m, EMASK),
                      **p_encoder(m, np.array([[True] * 5, [True, True, True, False, False]]))}),
    Config("tiny vectors", "vectors shorter than eps", lambda m: p_l2(m, TINY)),
    Config("two layers", "several layers", lambda m: p_encoder(m, n_layers=2)),
    Config("Pre-Norm", "a Pre-Norm encoder (final norm)", lambda m: p_encoder(m, prenorm=True)),
]


# seq2seq ----------------------------------------------------------------------------------------------------
def p_cross(mod, n_heads=2, n_kv_heads=None, d_memory=None, mask=None, bias=False, primed=False):
    attn = randomize(mod.CrossAttention(8, n_heads, n_kv_heads, d_memory, bias, R(0), F64), 180)
    if primed:
        prime(attn, 181)
    x, memory = normal(182, 2, 3, 8), normal(183, 2, 5, d_memory or 8)
    y, cache = attn.forward(x, memory, mask)
    d_x, d_memory_ = attn.backward(normal(184, *y.shape), cache)
    return {"cross.y": y, "cross.d_x": d_x, "cross.d_memory": d_memory_, **grads(attn)}


def p_decoder_block(mod, prenorm=True, memory_mask=None, primed=False):
    config = mod.Seq2SeqConfig(vocab_size=11, d_model=8, n_heads=2, max_len=8, prenorm=prenorm)
    block = randomize(mod.build_decoder_block(config, R(0), F64), 185)
    if primed:
        prime(block, 186)
    x, memory = normal(187, 2, 4, 8), normal(188, 2, 5, 8)
    y, cache = block.forward(x, memory, None, memory_mask)
    d_x, d_memory = block.backward(normal(189, *y.shape), cache)
    return {"block.y": y, "block.d_x": d_x, "block.d_memory": d_memory,
            **{"block." + k: v for k, v in grads(block).items()}}


def p_seq2seq(mod, src_mask=None, tgt_mask=None, bart=False, **fields):
    fields = {**dict(vocab_size=11, d_model=8, n_heads=2, max_len=8), **fields}
    config = mod.Seq2SeqConfig.bart(**fields) if bart else mod.Seq2SeqConfig(**fields)
    model = randomize(mod.EncoderDecoder(config, R(0), F64), 190)
    src, tgt = R(191).integers(0, 11, (2, 5)), R(192).integers(0, 11, (2, 4))
    logits, cache = model.forward(src, tgt, src_mask, tgt_mask)
    returned = model.backward(normal(193, *logits.shape), cache)
    return {"logits": logits, "returned": returned, **{"model." + k: v for k, v in grads(model).items()}}


SRC_PAD = np.array([[True] * 5, [True, True, True, False, False]])
CROSS_CONFIGS = [
    Config("cross-attention", None, lambda m: p_cross(m)),
    Config("cross-attention, bias, d_memory 6", None, lambda m: p_cross(m, d_memory=6, bias=True)),
    Config("cross-attention, GQA", "grouped-query heads", lambda m: p_cross(m, 4, 2)),
    Config("cross-attention, source padding", "source padding",
           lambda m: p_cross(m, mask=padding_mask(key_mask=SRC_PAD))),
    Config("cross-attention, accumulate", "gradients already non-zero", lambda m: p_cross(m, primed=True)),
]
CONFIGS["t16_cross_attention.py"] = CROSS_CONFIGS
CONFIGS["t17_seq2seq.py"] = [
    Config("Pre-Norm decoder layer", None, lambda m: p_decoder_block(m)),
    Config("Post-Norm decoder layer", None, lambda m: p_decoder_block(m, prenorm=False)),
    Config("encoder-decoder", None, lambda m: p_seq2seq(m)),
    Config("two decoder layers", "several decoder layers", lambda m: p_seq2seq(m, n_decoder_layers=2)),
    Config("BART", "the BART recipe (Post-Norm, logits bias)", lambda m: p_seq2seq(m, bart=True)),
    Config("padding", "source and target padding",
           lambda m: {**p_decoder_block(m, memory_mask=padding_mask(key_mask=SRC_PAD)),
                      **p_seq2seq(m, SRC_PAD, np.array([[True] * 4, [True, True, False, False]]))}),
    Config("accumulate", "gradients already non-zero", lambda m: p_decoder_block(m, primed=True)),
]


# flash ------------------------------------------------------------------------------------------------------
def p_flash(mod, H=2, H_kv=None, N=4, M=None, mask=None, causal=False, window=None, block=128, dtype=F64):
    M = N if M is None else M
    q = normal(200, 2, H, N, 3, scale=2).astype(dtype)
    k = normal(201, 2, H_kv or H, M, 3, scale=2).astype(dtype)
    v = normal(202, 2, H_kv or H, M, 3).astype(dtype)
    out, cache = mod.flash_attention_forward(q, k, v, mask, None, causal, window, block)
    d_q, d_k, d_v = mod.flash_attention_backward(normal(203, *out.shape).astype(dtype), cache)
    return {"out": out, "d_q": d_q, "d_k": d_k, "d_v": d_v}


LEFT = np.array([[False, False, True, True, True], [True] * 5])[:, None, None, :]
CONFIGS["t18_flash_attention.py"] = [
    Config("one block", None, lambda m: p_flash(m)),
    Config("one block, causal", None, lambda m: p_flash(m, causal=True)),
    Config("one block, GQA, N < M", None, lambda m: p_flash(m, 4, 2, N=3, M=5, causal=True)),
    Config("several blocks, causal", "keys spanning several blocks (block_size < M)",
           lambda m: p_flash(m, N=5, causal=True, block=2)),
    Config("several blocks, GQA", "keys spanning several blocks (block_size < M)",
           lambda m: p_flash(m, 4, 2, N=5, block=2)),
    Config("fully masked rows", "fully masked rows",
           lambda m: p_flash(m, mask=np.array([[False] * 4, [True] * 4])[:, None, None, :])),
    Config("left padding, several blocks", "left padding across several blocks",
           lambda m: p_flash(m, N=5, mask=LEFT, block=2)),
    Config("window, several blocks", "sliding window across several blocks",
           lambda m: p_flash(m, N=6, causal=True, window=2, block=2)),
    Config("float32", "float32", lambda m: p_flash(m, 4, 2, N=5, causal=True, block=2, dtype=F32), True),
]


# -- loading edited files ------------------------------------------------------------------
WORK = Path(tempfile.mkdtemp(prefix="heldout2-"))
if "--keep" not in sys.argv[1:]:
    atexit.register(shutil.rmtree, WORK, ignore_errors=True)
_loaded = [0]


def load(source, file):
    """The module of ``source`` (an edited copy of npformer/``file``), beside npformer's own."""
    _loaded[0] += 1
    package = "npformer.training" if file.startswith("training/") else "npformer"
    name = f"{package}._heldout2_{Path(file).stem}_{_loaded[0]}"
    path = WORK / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def find_def(tree, qualname):
    """The ast node of ``qualname`` ("Class.method" or "function") at the top of ``tree``."""
    body, node = tree.body, None
    for part in qualname.split("."):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                     and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return node if isinstance(node, ast.FunctionDef) else None


def def_span(source, qualname):
    """(start, stop) character offsets of the whole ``def`` block, decorators included."""
    node = find_def(ast.parse(source), qualname)
    if node is None:
        return None
    lines = source.splitlines(keepends=True)
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    start = sum(len(line) for line in lines[:first - 1])
    stop = sum(len(line) for line in lines[:node.end_lineno])
    return start, stop


# -- comparing results ----------------------------------------------------------------------
def flatten(result):
    flat = {}
    for key, value in result.items():
        if isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                flat[f"{key}[{i}]"] = item
        else:
            flat[key] = value
    return flat


def difference(got, want):
    """(worst relative difference over every entry, dtypes all equal)."""
    got, want = flatten(got), flatten(want)
    worst, same_dtypes = 0.0, True
    for key in set(got) | set(want):
        a, b = got.get(key, "missing"), want.get(key, "missing")
        if a is None and b is None:
            continue
        if isinstance(a, str) or isinstance(b, str) or a is None or b is None:
            return np.inf, same_dtypes
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return np.inf, same_dtypes
        if a.dtype != b.dtype:
            same_dtypes = False
        if a.dtype == bool or b.dtype == bool:
            if not np.array_equal(a, b):
                return np.inf, same_dtypes
            continue
        a, b = a.astype(np.float64), b.astype(np.float64)
        if not np.array_equal(np.isnan(a), np.isnan(b)) or \
                not np.array_equal(np.isposinf(a), np.isposinf(b)) or \
                not np.array_equal(np.isneginf(a), np.isneginf(b)):
            return np.inf, same_dtypes
        finite = np.isfinite(b)
        scale = np.max(np.abs(b[finite]), initial=0.0)
        gap = np.max(np.abs(a[finite] - b[finite]), initial=0.0)
        if gap > 0:
            worst = max(worst, gap / scale if scale > 0 else np.inf)
    return worst, same_dtypes


def run(config, module):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return config.run(module)


# -- the checks -------------------------------------------------------------------------------
def write_key():
    key = WORK / "key"
    done = subprocess.run([sys.executable, "-m", "npformer", "exercises", str(key), "--solutions",
                           "--forward"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"check.py: writing the answer key failed:\n{done.stdout}\n{done.stderr}")
    return key


def catalogue_problem(entry):
    exercise = BY_NAME.get(entry.get("exercise"))
    if exercise is None:
        return f"unknown exercise {entry.get('exercise')!r}"
    spec = f"{entry['file']}:{entry['function']}"
    if spec not in exercise.functions(forward=True):
        return f"{spec} is not one of exercise {exercise.name}'s functions"
    if "kind" in entry:
        kind = "backward" if spec in exercise.backward else "forward"
        if entry["kind"] != kind:
            return f"kind {entry['kind']!r}, but the catalogue lists {spec} as {kind}"
    return None


class Checker:
    def __init__(self):
        self.key = write_key()
        self.sources, self.references = {}, {}
        self.failures = []

    def source(self, file):
        if file not in self.sources:
            self.sources[file] = (self.key / Path(file).name).read_text()
        return self.sources[file]

    def reference(self, file):
        """The key's own results on every input of ``file`` (they must all run)."""
        if file not in self.references:
            module = load(self.source(file), file)
            results = {}
            for config in CONFIGS[file]:
                try:
                    results[config.name] = run(config, module)
                except Exception:
                    sys.exit(f"check.py: the answer key itself fails on {file}, {config.name}:\n"
                             f"{traceback.format_exc()}")
            self.references[file] = results
        return self.references[file]

    def fail(self, kind, entry, why):
        self.failures.append(f"{kind} {entry.get('id')}: {why}")

    def edited(self, kind, entry, start, stop, replacement):
        """The module of the key's file with [start, stop) replaced, or None (failure noted)."""
        source = self.source(entry["file"])
        new_source = source[:start] + replacement + source[stop:]
        try:
            compile(new_source, entry["file"], "exec")
        except SyntaxError as error:
            self.fail(kind, entry, f"the edited file does not compile: {error}")
            return None
        try:
            return load(new_source, entry["file"])
        except Exception as error:
            self.fail(kind, entry, f"the edited file does not import: {error!r}")
            return None

    # mistakes ----------------------------------------------------------------------------
    def mistake(self, entry):
        missing = {"id", "exercise", "file", "function", "old", "new", "what", "kind"} - set(entry)
        if missing:
            return self.fail("mistake", entry, f"fields missing: {sorted(missing)}")
        problem = catalogue_problem(entry)
        if problem:
            return self.fail("mistake", entry, problem)
        source, old = self.source(entry["file"]), entry["old"]
        if source.count(old) != 1:
            return self.fail("mistake", entry, f"old occurs {source.count(old)} times in the key's "
                                               f"{entry['file']}")
        start = source.index(old)
        span = def_span(source, entry["function"])
        if span is None or not (span[0] <= start and start + len(old) <= span[1]):
            return self.fail("mistake", entry, f"old is not inside {entry['function']}")
        if entry["new"] == old:
            return self.fail("mistake", entry, "new equals old")
        module = self.edited("mistake", entry, start, start + len(old), entry["new"])
        if module is None:
            return None
        reference = self.reference(entry["file"])
        shown_on, raised_on = [], []
        for config in CONFIGS[entry["file"]]:
            if config.float32:
                continue
            try:
                result = run(config, module)
            except Exception as error:
                if config.special is None:
                    return self.fail("mistake", entry, f"raises on ordinary input {config.name!r}: "
                                                       f"{error!r}")
                raised_on.append(config)
                continue
            gap, _ = difference(result, reference[config.name])
            if gap > MISTAKE_CHANGE:
                shown_on.append((config, gap))
        if not shown_on and not raised_on:
            return self.fail("mistake", entry, "changes no number on any input")
        ordinary = [c for c, _ in shown_on if c.special is None]
        if ordinary and entry.get("note", "").startswith("only"):
            return self.fail("mistake", entry, f"the note says {entry['note']!r}, but it shows on the "
                                               f"ordinary input {ordinary[0].name!r}")
        if not ordinary and not entry.get("note"):
            where = sorted({c.special for c, _ in shown_on} | {c.special for c in raised_on})
            return self.fail("mistake", entry, f"shows only on special inputs ({'; '.join(where)}) "
                                               f"and has no note")
        if VERBOSE:
            where = ", ".join(f"{c.name} ({gap:.1e})" for c, gap in shown_on)
            raised = ", ".join(c.name for c in raised_on)
            print(f"  ok  {entry['id']:48s} shows on: {where}" + (f"; raises on: {raised}" if raised else ""))
        return True

    # alternatives ---------------------------------------------------------------------------
    def alternative(self, entry):
        missing = {"id", "exercise", "file", "function", "body", "style"} - set(entry)
        if missing:
            return self.fail("alternative", entry, f"fields missing: {sorted(missing)}")
        problem = catalogue_problem(entry)
        if problem:
            return self.fail("alternative", entry, problem)
        source = self.source(entry["file"])
        span = def_span(source, entry["function"])
        if span is None:
            return self.fail("alternative", entry, f"no def {entry['function']} in the key")
        original = source[span[0]:span[1]]
        body = entry["body"] if entry["body"].endswith("\n") else entry["body"] + "\n"
        indent = original[:len(original) - len(original.lstrip())]
        name = entry["function"].split(".")[-1]
        if not body.startswith(f"{indent}def {name}("):
            return self.fail("alternative", entry, f"body must start with {indent!r}def {name}(")
        if ast.dump(ast.parse(body.strip() if not indent else "class _:\n" + body)) == \
                ast.dump(ast.parse(original.strip() if not indent else "class _:\n" + original)):
            return self.fail("alternative", entry, "body is the key's own code")
        module = self.edited("alternative", entry, span[0], span[1], body)
        if module is None:
            return None
        reference = self.reference(entry["file"])
        worst = {}
        for config in CONFIGS[entry["file"]]:
            try:
                result = run(config, module)
            except Exception as error:
                return self.fail("alternative", entry, f"raises on {config.name!r}: {error!r}")
            gap, same_dtypes = difference(result, reference[config.name])
            tolerance = ALT_TOL32 if config.float32 else ALT_TOL64
            if not same_dtypes:
                return self.fail("alternative", entry, f"changes a dtype on {config.name!r}")
            if not gap <= tolerance:
                return self.fail("alternative", entry, f"differs from the key on {config.name!r} by "
                                                       f"{gap:.2e} relative (tolerance {tolerance:.0e})")
            worst[config.float32] = max(worst.get(config.float32, 0.0), gap)
        if VERBOSE:
            print(f"  ok  {entry['id']:48s} worst relative difference {worst.get(False, 0):.1e} (float64), "
                  f"{worst.get(True, 0):.1e} (float32), {len(CONFIGS[entry['file']])} inputs")
        return True


def main():
    mistakes = json.loads((HERE / "mistakes.json").read_text())
    alternatives = json.loads((HERE / "alternatives.json").read_text())
    ids = [e.get("id") for e in mistakes + alternatives]
    checker = Checker()
    for duplicate in sorted({i for i in ids if ids.count(i) > 1}):
        checker.failures.append(f"id {duplicate!r} is used more than once")
    if VERBOSE:
        print(f"answer key: {checker.key}")
        print("mistakes:")
    for entry in mistakes:
        checker.mistake(entry)
    if VERBOSE:
        print("alternatives:")
    for entry in alternatives:
        checker.alternative(entry)

    per_exercise = Counter(e.get("exercise") for e in mistakes)
    kinds = Counter(e.get("kind") for e in mistakes)
    noted = sum(1 for e in mistakes if e.get("note"))
    functions = Counter(e.get("function") for e in alternatives)
    for failure in checker.failures:
        print("FAIL", failure)
    if VERBOSE or checker.failures:
        print("mistakes per exercise: " + ", ".join(f"{k} {v}" for k, v in per_exercise.items()))
        print("alternatives per function: " + ", ".join(f"{k} {v}" for k, v in functions.items()))
    verdict = "all pass" if not checker.failures else f"{len(checker.failures)} FAILED"
    print(f"heldout2: {len(mistakes)} mistakes ({kinds['backward']} backward, {kinds['forward']} forward, "
          f"{noted} with a note) over {len(per_exercise)} exercises; {len(alternatives)} alternatives "
          f"for {len(functions)} functions; {verdict}")
    return 1 if checker.failures else 0


if __name__ == "__main__":
    sys.exit(main())
