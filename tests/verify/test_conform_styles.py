"""Code in other people's styles, each with the slips people make in their own code: named.

Every implementation here is written for these tests from its formulas, in the style of a kind
of published code (Meta's complex-number RoPE, Llama's RMSNorm and SwiGLU MLP, GQA by
repeat_interleave, PyTorch's AdamW arrangement, a causal tril mask, a Llama block over a
params dict); correct, it conforms (or conforms under its convention); with one slip it does
not, and the report names the slip: the catalogued mistake that computes what it computes.
"""
import numpy as np
import pytest

from npformer.testing import conform
from npformer.testing.modules import conform_module

pytest.importorskip("hypothesis")
EXAMPLES = 25


def named(report):
    return {c.failure.mistake.name for c in report.failures if c.failure.mistake is not None}


# -- Meta's RoPE: pairs (x0, x1), (x2, x3) ... as complex numbers ------------------------------------
def complex_rope(slip=None):
    def forward(x, positions, base=10000.0):
        D = x.shape[-1]
        exponent = np.arange(0, D, 2)[: D // 2] / D
        if slip == "frequency":
            exponent = np.arange(D // 2) / D                  # c / D for 2c / D
        p = np.asarray(positions, np.float64) + (1 if slip == "from one" else 0)
        theta = p[..., None] * base ** -exponent
        theta = theta[:, None] if theta.ndim == 3 else theta
        turn = np.exp(1j * theta) if slip != "sign" else np.exp(-1j * theta)
        return _apply(x, turn), turn

    def backward(d_out, turn):
        return _apply(d_out, np.conj(turn)), None
    return forward, backward


def _apply(x, turn):
    turned = (x[..., 0::2] + 1j * x[..., 1::2]) * turn
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = turned.real, turned.imag
    return out


def test_complex_rope_conforms_under_interleaved_pairs():
    report = conform("rope", *complex_rope(), examples=EXAMPLES)
    assert report.verdict == "conforms under convention" and report.convention == {"layout": "interleaved"}


@pytest.mark.parametrize("slip, mistake", [("sign", "rope-rotate-turns-backwards"),
                                           ("frequency", "rope-frequencies-pairs-not-doubled"),
                                           ("from one", "rope-positions-from-one")])
def test_complex_rope_slips_are_named_under_its_convention(slip, mistake):
    report = conform("rope", *complex_rope(slip), examples=EXAMPLES)
    assert not report.ok and report.convention == {"layout": "interleaved"}, str(report)
    assert mistake in named(report), str(report)


# -- Llama's RMSNorm (x * rsqrt(mean(x^2) + eps) * weight) ----------------------------------------
def llama_rmsnorm(slip=None):
    def forward(x, gamma, eps=1e-6):
        square = (x * x).sum(-1, keepdims=True) if slip == "sum" else (x * x).mean(-1, keepdims=True)
        inv = 1 / (np.sqrt(square) + eps) if slip == "eps after root" else 1 / np.sqrt(square + eps)
        gain = 1 + gamma if slip == "one plus" else gamma
        return x * inv * gain
    return forward


def test_llama_rmsnorm_slip_is_named():
    assert conform("rmsnorm", llama_rmsnorm(), examples=EXAMPLES).ok
    report = conform("rmsnorm", llama_rmsnorm("sum"), examples=EXAMPLES)
    assert not report.ok and named(report) == {"rmsnorm-sum-of-squares"}, str(report)


@pytest.mark.parametrize("change, convention", [("eps after root", {"eps": "outside sqrt"}),
                                                ("one plus", {"gain": "1 + w"})])
def test_what_llama_would_not_do_is_another_codebases_convention(change, convention):
    # eps after the root is the RMSNorm paper's code, 1 + w Gemma's: no slip of conform's to name
    report = conform("rmsnorm", llama_rmsnorm(change), examples=EXAMPLES)
    assert report.verdict == "conforms under convention" and report.convention == convention, str(report)


# -- Llama's MLP: down(silu(gate(x)) * up(x)) -------------------------------------------------------
def llama_mlp(slip=None):
    def silu(t):
        return t / (1 + np.exp(-t))

    def forward(x, w_gate, w_up, w_down):
        g, u = x @ w_gate, x @ w_up
        if slip == "swapped":
            g, u = u, g
        h = silu(g * u) if slip == "product" else silu(g) * u
        return h @ w_down
    return forward


@pytest.mark.parametrize("slip, mistake", [("swapped", "swiglu-silu-on-the-value"),
                                           ("product", "swiglu-silu-of-the-product")])
def test_llama_mlp_slips_are_named(slip, mistake):
    assert conform("swiglu", llama_mlp(), examples=EXAMPLES).ok
    report = conform("swiglu", llama_mlp(slip), examples=EXAMPLES)
    assert not report.ok and mistake in named(report), str(report)


# -- grouped-query attention by repeat_interleave, always causal, a tril mask --------------------------
def gqa_attention(slip=None):
    def forward(q, k, v):
        group = q.shape[1] // k.shape[1]
        if slip == "tiled":
            k, v = np.tile(k, (1, group, 1, 1)), np.tile(v, (1, group, 1, 1))
        else:
            k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        N, D = q.shape[2], q.shape[-1]
        scale = 1 / np.sqrt(q.shape[1] * D) if slip == "model width" else 1 / np.sqrt(D)
        scores = q @ k.swapaxes(-1, -2) * scale
        tril = np.tril(np.ones((N, N), bool), k=1 if slip == "off by one" else 0)
        scores = np.where(tril, scores, -np.inf)
        w = np.exp(scores - scores.max(-1, keepdims=True))
        return (w / w.sum(-1, keepdims=True)) @ v
    return forward


@pytest.mark.parametrize("slip, mistake", [("tiled", "gqa-forward-tiled"),
                                           pytest.param("model width", "attention-forward-scale-by-model-width",
                                                        marks=pytest.mark.full),
                                           pytest.param("off by one", "may-read-one-ahead", marks=pytest.mark.full)])
def test_gqa_attention_slips_are_named(slip, mistake):
    scope = "causal=True,no_cached_keys"
    assert conform("grouped_attention", gqa_attention(), examples=EXAMPLES, scope=scope).ok
    report = conform("grouped_attention", gqa_attention(slip), examples=EXAMPLES, scope=scope)
    assert not report.ok and mistake in named(report), str(report)


# -- PyTorch's AdamW arrangement ----------------------------------------------------------------------
def torch_adamw(slip=None):
    def update(data, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        b1, b2 = betas
        if slip == "l2":
            grad = grad + weight_decay * data                # Adam with L2, the decay in the gradient
        else:
            data = data * (1 - lr * weight_decay)
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad ** 2
        t = step + 1 if slip == "next step" else step
        denom = np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps
        return data - lr / (1 - b1 ** t) * m / denom, m, v
    return update


def test_torch_adamw_conforms_to_float64_rounding():
    assert conform("adamw", torch_adamw(), examples=EXAMPLES).ok


@pytest.mark.parametrize("slip, mistake", [("l2", "adamw-decay-coupled"), ("next step", "adamw-steps-off-by-one")])
def test_torch_adamw_slips_are_named(slip, mistake):
    report = conform("adamw", torch_adamw(slip), examples=EXAMPLES)
    assert not report.ok and mistake in named(report), str(report)


# -- a Llama block over a params dict (outputs only) --------------------------------------------------
H, H_KV, D_MODEL, HIDDEN = 4, 2, 24, 20


def llama_block(slip=None):
    """x + attn(rms(x)), then + mlp(rms(h)); RoPE on half pairs (rotate_half), GQA, SwiGLU."""
    def rms(x, w):
        square = (x * x).mean(-1, keepdims=True)
        inv = 1 / (np.sqrt(square) + 1e-6) if slip == "eps after root" else 1 / np.sqrt(square + 1e-6)
        return x * inv * w

    def rope(t):
        N, D = t.shape[2], t.shape[-1]
        p = np.arange(N) + (1 if slip == "positions from one" else 0)
        freqs = p[:, None] * 10000.0 ** (-np.arange(0, D, 2) / D)
        cos, sin = np.cos(np.concatenate([freqs, freqs], -1)), np.sin(np.concatenate([freqs, freqs], -1))
        half = D // 2
        turned = np.concatenate([-t[..., half:], t[..., :half]], -1)
        if slip == "rope sign":
            turned = -turned
        return t * cos + turned * sin

    def attention(x, p):
        B, N, _ = x.shape
        D = D_MODEL // H

        def heads(w, count):
            return (x @ w).reshape(B, N, count, D).transpose(0, 2, 1, 3)
        q, k, v = heads(p["wq"], H), heads(p["wk"], H_KV), heads(p["wv"], H_KV)
        q, k = rope(q), rope(k)
        if slip == "gqa tiled":
            k, v = np.tile(k, (1, H // H_KV, 1, 1)), np.tile(v, (1, H // H_KV, 1, 1))
        else:
            k, v = np.repeat(k, H // H_KV, axis=1), np.repeat(v, H // H_KV, axis=1)
        scores = np.where(np.tril(np.ones((N, N), bool)), q @ k.swapaxes(-1, -2) / np.sqrt(D), -np.inf)
        w = np.exp(scores - scores.max(-1, keepdims=True))
        return ((w / w.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(B, N, -1) @ p["wo"]

    def mlp(x, p):
        g, u = x @ p["w1"], x @ p["w3"]
        if slip == "gate up swapped":
            g, u = u, g
        return (g / (1 + np.exp(-g)) * u) @ p["w2"]

    def block(params, x):
        h = x + attention(rms(x, params["attention_norm"]), params["attention"])
        return h + mlp(rms(h, params["ffn_norm"]), params["feed_forward"])
    return block


LLAMA_MAP = {"attention_norm": "norm1.gamma", "ffn_norm": "norm2.gamma",
             "attention.wq": ("attn.qkv.weight", "q"), "attention.wk": ("attn.qkv.weight", "k"),
             "attention.wv": ("attn.qkv.weight", "v"), "attention.wo": "attn.out.weight",
             "feed_forward.w1": "ffn.gate.weight", "feed_forward.w3": "ffn.up.weight",
             "feed_forward.w2": "ffn.down.weight"}
LLAMA_CONFIG = {"d_model": D_MODEL, "n_heads": H, "n_kv_heads": H_KV, "ffn_hidden": HIDDEN}


def test_a_llama_block_over_a_params_dict_conforms():
    report = conform_module("llama_block", llama_block(), LLAMA_MAP, LLAMA_CONFIG)
    assert report.verdict == "conforms", report


def test_positions_from_one_in_q_and_k_alike_change_no_score():
    # a score depends on the offset of two positions alone: moving both by 1 changes nothing,
    # so this "slip" is a block that computes the right function, and conforms
    report = conform_module("llama_block", llama_block("positions from one"), LLAMA_MAP, LLAMA_CONFIG)
    assert report.verdict == "conforms", report


@pytest.mark.parametrize("slip, mistake", [("eps after root", "rmsnorm-eps-outside-sqrt"),
                                           ("rope sign", "rope-rotate-turns-backwards"),
                                           ("gqa tiled", "gqa-forward-tiled"),
                                           ("gate up swapped", "swiglu-silu-on-the-value")])
def test_a_llama_block_slip_is_named(slip, mistake):
    report = conform_module("llama_block", llama_block(slip), LLAMA_MAP, LLAMA_CONFIG)
    assert report.verdict == "does not conform", report
    assert report.mistake is not None and report.mistake.name == mistake, report
    assert str(report).split("\n")[1].startswith(f"  the mistake: {mistake}")
