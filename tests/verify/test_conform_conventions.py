"""Code in the conventions published codebases follow, found without being stated: right and wrong.

Each implementation here is written for this file from the formulas, in the style of a kind of
published code (the Annotated Transformer's LayerNorm, the RMSNorm paper's and Gemma's,
T5's unscaled attention, masks filled with -1e9 or torch.finfo().min, Vaswani's embeddings
times sqrt(d), Gemma's GeGLU, GPT-NeoX's partial rotary and parallel residual, its per-head
fused QKV ...), never calling npformer. Correct, it must conform under the convention, named in
the report, found by ``conform`` or ``conform_module`` without being told; with one slip it
must not conform, and the report must name the slip or locate it.

``CASES`` lists them; ``tests/support/convention_figures.py`` prints what npformer says of each.
"""
import numpy as np
import pytest
from scipy.special import erf

from npformer.testing import conform

pytest.importorskip("hypothesis")

EXAMPLES = 12


def named(report):
    return {c.failure.mistake.name for c in report.failures if c.failure.mistake is not None}


def _lead(x):
    return tuple(range(x.ndim - 1))


# == norms ===========================================================================================
def annotated_layernorm(unbiased=True, eps_outside=True, one_plus=False, slip=None):
    """The Annotated Transformer's LayerNorm: a_2 (x - mean) / (std + eps) + b_2, its std
    torch's unbiased one; each of the three choices can be switched (eps inside the root, the
    biased variance, a gain stored as w with 1 + w applied, as Megatron's layernorm_1p)."""
    def forward(x, gamma, beta, eps=1e-5):
        d = x.shape[-1]
        centred = x - x.mean(-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            var = (centred ** 2).sum(-1, keepdims=True) / (d - 1 if unbiased else d)
        std = np.sqrt(var)
        scale = 1 / (std + eps) if eps_outside else 1 / np.sqrt(var + eps)
        gain = 1 + gamma if one_plus else gamma
        return gain * centred * scale + beta, (centred, var, scale, gain, eps, d)

    def backward(dy, cache):
        centred, var, scale, gain, eps, d = cache
        dn = dy * gain
        n = d - 1 if unbiased else d
        # y = g c s(var), var = sum c^2 / n: d var / d c = 2 c / n
        if eps_outside:
            std = np.sqrt(var)
            with np.errstate(invalid="ignore", divide="ignore"):
                d_scale_d_var = np.where(std > 0, -scale ** 2 / (2 * np.where(std > 0, std, 1)), 0.0)
        else:
            d_scale_d_var = -0.5 * scale ** 3
        d_var = (dn * centred).sum(-1, keepdims=True) * d_scale_d_var
        d_centred = dn * scale + d_var * 2 * centred / n
        dx = d_centred if slip == "no mean path" else d_centred - d_centred.mean(-1, keepdims=True)
        d_gain = (dy * centred * scale).sum(axis=_lead(dy))
        return dx, d_gain, dy.sum(axis=_lead(dy))
    return forward, backward


def paper_rmsnorm(eps_outside=True, one_plus=False, slip=None):
    """RMSNorm as its paper's code writes it, x / (rms + eps) * g (``eps_outside=False``: inside
    the root, as Llama); ``one_plus``: Gemma's gain, x / rms * (1 + w)."""
    def forward(x, gamma, eps=1e-6):
        ms = (x * x).mean(-1, keepdims=True)
        scale = 1 / (np.sqrt(ms) + eps) if eps_outside else 1 / np.sqrt(ms + eps)
        gain = 1 + gamma if one_plus else gamma
        return x * scale * gain, (x, ms, scale, gain, eps)

    def backward(dy, cache):
        x, ms, scale, gain, eps = cache
        dn = dy * gain
        if eps_outside:
            rms = np.sqrt(ms)
            d_scale_d_ms = np.where(rms > 0, -scale ** 2 / (2 * np.where(rms > 0, rms, 1)), 0.0)
        else:
            d_scale_d_ms = -0.5 * scale ** 3
        d_ms = (dn * x).sum(-1, keepdims=True) * d_scale_d_ms
        dx = dn * scale + (0 if slip == "no rms path" else d_ms * 2 * x / x.shape[-1])
        d_gain = (dy * x * scale).sum(axis=_lead(dy))
        return dx, (d_gain if slip != "gain gradient of 1 + w" else d_gain + 1)
    return forward, backward


# == attention ========================================================================================
def _softmax_rows(scores):
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def filled_attention(fill="masked_fill -1e9", scaled=True, slip=None):
    """Attention as the Annotated Transformer writes it: scores.masked_fill(mask == 0, -1e9)
    (a row with nothing to read weighs every key alike, and its filled scores get no gradient);
    or ``fill`` "additive finfo.min" (Hugging Face's additive mask of the dtype's minimum: such a
    row is uniform too, but the softmax's gradient still reaches its scores), "additive -inf" (a
    row with nothing to read is NaN), "additive -1e9" (such a row weighted by its scores) or
    "zero" (npformer's choice: it reads nothing); ``scaled=False``: T5's attention, no 1/sqrt(D)
    (it lives in the initialisation).
    Every head its own keys, the queries the last N of M positions."""
    def forward(q, k, v, mask=None, causal=False):
        B, H, N, D = q.shape
        M = k.shape[2]
        scores = q @ k.swapaxes(-1, -2)
        if scaled:
            scores = scores / np.sqrt(D)
        allowed = np.ones((B, H, N, M), bool) if mask is None else np.broadcast_to(mask, (B, H, N, M))
        if causal:
            allowed = allowed & (np.arange(M)[None, :] <= np.arange(M - N, M)[:, None])
        if fill == "masked_fill -1e9":
            scores = np.where(allowed, scores, -1e9)
        elif fill == "zero":
            scores = np.where(allowed, scores, -np.inf)
        else:
            said = fill.split()[-1]
            scores = scores + np.where(allowed, 0.0, np.finfo(np.float64).min if said == "finfo.min" else float(said))
        with np.errstate(invalid="ignore"):
            weights = _softmax_rows(scores)
        if fill == "zero":                          # a row with nothing to read reads nothing
            weights = np.where(allowed.any(-1, keepdims=True), weights, 0.0)
        return weights @ v, (q, k, v, weights, D, allowed)

    def backward(d_out, cache):
        q, k, v, weights, D, allowed = cache
        d_weights = d_out @ v.swapaxes(-1, -2)
        d_scores = weights * (d_weights - (d_weights * weights).sum(-1, keepdims=True))
        if fill.startswith("masked_fill"):        # a filled score is a constant: no gradient
            d_scores = np.where(allowed, d_scores, 0.0)
        if scaled:
            d_scores = d_scores / np.sqrt(D)
        d_q = d_scores @ k
        d_k = d_scores.swapaxes(-1, -2) @ q
        d_v = weights.swapaxes(-1, -2) @ d_out
        return (d_k, d_q, d_v) if slip == "d_q and d_k returned swapped" else (d_q, d_k, d_v)
    return forward, backward


def annotated_grouped(fill="zero", scaled=True, slip=None):
    """``filled_attention`` with each key/value head shared by a group of query heads (Llama's
    repeat_kv: head h reads key/value head h // group), its gradients summed over the group."""
    forward, backward = filled_attention(fill, scaled, slip)

    def grouped_forward(q, k, v, mask=None, causal=False):
        group = q.shape[1] // k.shape[1]
        out, inner = forward(q, np.repeat(k, group, axis=1), np.repeat(v, group, axis=1), mask, causal)
        return out, (inner, group)

    def grouped_backward(d_out, cache):
        inner, group = cache
        d_q, d_k, d_v = backward(d_out, inner)
        B, H, M = d_k.shape[:3]

        def fold(g):
            return g.reshape(B, H // group, group, M, -1).sum(axis=2)
        return d_q, fold(d_k), fold(d_v)
    return grouped_forward, grouped_backward


def annotated_multi_head(fill="masked_fill -1e9", scaled=True, slip=None):
    """The Annotated Transformer's MultiHeadedAttention with separate projections, x @ W (no
    biases), its masks filled with -1e9; ``scaled=False``: the scale folded into W_q (Mesh
    TensorFlow and T5 initialise W_q d^-0.5 smaller and never divide)."""
    attention_forward, attention_backward = filled_attention(fill, scaled)

    def forward(x, w_q, w_k, w_v, w_o, n_heads, mask=None, causal=False):
        B, N, d = x.shape
        D = w_q.shape[1] // n_heads

        def split(t):
            return t.reshape(B, N, -1, D).transpose(0, 2, 1, 3)
        k, v = split(x @ w_k), split(x @ w_v)
        group = n_heads // k.shape[1]
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        heads, inner = attention_forward(split(x @ w_q), k, v, mask, causal)
        merged = heads.transpose(0, 2, 1, 3).reshape(B, N, -1)
        return merged @ w_o, (x, w_q, w_k, w_v, w_o, merged, inner, group)

    def backward(d_out, cache):
        x, w_q, w_k, w_v, w_o, merged, inner, group = cache
        B, N, d = x.shape
        rows = x.reshape(-1, d)
        d_w_o = merged.reshape(B * N, -1).T @ d_out.reshape(B * N, -1)
        d_merged = d_out @ w_o.T
        D = inner[0].shape[-1]
        d_q, d_k, d_v = attention_backward(d_merged.reshape(B, N, -1, D).transpose(0, 2, 1, 3), inner)
        H = d_k.shape[1]

        def fold(g):
            return g.reshape(B, H // group, group, N, D).sum(axis=2)

        def join(g):
            return g.transpose(0, 2, 1, 3).reshape(B * N, -1)
        d_k, d_v = fold(d_k), fold(d_v)
        if slip == "W_q's gradient from d_k":
            d_q_rows = join(fold(d_q)) if group > 1 else join(d_k)
        else:
            d_q_rows = join(d_q)
        d_x = d_q_rows @ w_q.T + join(d_k) @ w_k.T + join(d_v) @ w_v.T
        return d_x.reshape(x.shape), rows.T @ d_q_rows, rows.T @ join(d_k), rows.T @ join(d_v), d_w_o
    return forward, backward


# == embeddings, feed-forward, rotary ===================================================================
def vaswani_embedding(slip=None):
    """Embeddings times sqrt(d_model), as "Attention is all you need" (and Gemma) scale them."""
    def forward(ids, table):
        return table[ids] * np.sqrt(table.shape[1]), (ids, table.shape)

    def backward(dy, cache):
        ids, shape = cache
        d_table = np.zeros(shape)
        np.add.at(d_table, ids, dy if slip == "gradient not scaled" else dy * np.sqrt(shape[1]))
        return None, d_table
    return forward, backward


def _gelu(x, tanh):
    if tanh:
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def _gelu_slope(x, tanh):
    if tanh:
        c = np.sqrt(2 / np.pi)
        t = np.tanh(c * (x + 0.044715 * x ** 3))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)
    return 0.5 * (1 + erf(x / np.sqrt(2))) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)


def geglu(tanh=True, slip=None):
    """Gemma's MLP: gelu(x W_gate) * (x W_up), then W_down (``tanh``: the approximate GELU, as
    Gemma's gelu_pytorch_tanh; else the exact one, as the GLU-variants paper's GeGLU)."""
    def forward(x, w_gate, w_up, w_down):
        g, u = x @ w_gate, x @ w_up
        h = _gelu(g, tanh) * u
        return h @ w_down, (x, g, u, h, w_gate, w_up, w_down)

    def backward(dy, cache):
        x, g, u, h, w_gate, w_up, w_down = cache
        d_h = dy @ w_down.T
        slope = _gelu_slope(g, tanh) if slip != "gate's slope as sigmoid's" else 1 / (1 + np.exp(-g))
        d_g, d_u = d_h * u * slope, d_h * _gelu(g, tanh)

        def outer(a, b):
            return a.reshape(-1, a.shape[-1]).T @ b.reshape(-1, b.shape[-1])
        return d_g @ w_gate.T + d_u @ w_up.T, outer(x, d_g), outer(x, d_u), outer(h, dy)
    return forward, backward


def neox_rotary(fraction=0.25, slip=None):
    """GPT-NeoX's rotary_pct: the first D_rot = fraction D features of each head turned on
    half pairs (rotate_half), the rest passed through."""
    def tables(positions, D_rot, base):
        theta = np.asarray(positions, np.float64)[..., None] * base ** (-np.arange(0, D_rot, 2) / D_rot)
        theta = theta[:, None] if theta.ndim == 3 else theta
        full = np.concatenate([theta, theta], -1)
        return np.cos(full), np.sin(full)

    def rotate_half(t):
        half = t.shape[-1] // 2
        return np.concatenate([-t[..., half:], t[..., :half]], -1)

    def forward(x, positions, base=10000.0):
        D_rot = 2 * (int(x.shape[-1] * fraction) // 2)        # rotary_ndims, whole pairs
        cos, sin = tables(positions, D_rot, base)
        turned = x[..., :D_rot] * cos + rotate_half(x[..., :D_rot]) * sin
        return np.concatenate([turned, x[..., D_rot:]], -1), (cos, sin, D_rot)

    def backward(d_out, cache):
        cos, sin, D_rot = cache
        d_turned = d_out[..., :D_rot] * cos - rotate_half(d_out[..., :D_rot] * sin)
        rest = np.zeros_like(d_out[..., D_rot:]) if slip == "pass-through gets no gradient" else d_out[..., D_rot:]
        return np.concatenate([d_turned, rest], -1), None
    return forward, backward


def gptj_rotary(slip=None):
    """GPT-J's rotate_every_two: pairs (x0, x1), (x2, x3) ... (interleaved), sin and cos
    repeated per pair."""
    def rotate_every_two(t):
        out = np.empty_like(t)
        out[..., 0::2], out[..., 1::2] = -t[..., 1::2], t[..., 0::2]
        return out

    def forward(x, positions, base=10000.0):
        D = x.shape[-1]
        theta = np.asarray(positions, np.float64)[..., None] * base ** (-np.arange(0, D, 2) / D)
        theta = np.repeat(theta[:, None] if theta.ndim == 3 else theta, 2, axis=-1)
        cos, sin = np.cos(theta), np.sin(theta)
        return x * cos + rotate_every_two(x) * sin, (cos, sin)

    def backward(d_out, cache):
        cos, sin = cache
        if slip == "turned forward again":
            return d_out * cos + rotate_every_two(d_out) * sin, None
        return d_out * cos - rotate_every_two(d_out * sin), None      # rotate_every_two^T = -rotate_every_two
    return forward, backward


def tanh_gelu(slip=None):
    """PyTorch's F.gelu(x, approximate='tanh') with its derivative, checked as "gelu"."""
    def forward(x):
        return _gelu(x, True), x

    def backward(dy, x):
        slope = _gelu_slope(x, True)
        return dy * (slope if slip != "half the derivative" else 0.5 * slope)
    return forward, backward


def summed_cross_entropy(slip=None):
    """nn.CrossEntropyLoss(reduction='sum', ignore_index=-100) with its backward."""
    def forward(logits, targets, ignore_index=-100):
        counted = targets != ignore_index
        shifted = logits - logits.max(-1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        safe = np.where(counted, targets, 0)
        picked = np.take_along_axis(logp, safe[..., None], -1)[..., 0]
        return -(picked * counted).sum(), (logp, safe, counted)

    def backward(d_loss, cache):
        logp, safe, counted = cache
        d = np.exp(logp)
        np.put_along_axis(d, safe[..., None], np.take_along_axis(d, safe[..., None], -1) - 1, -1)
        weight = counted[..., None] if slip != "ignored targets counted" else 1.0
        return d * weight * d_loss, None
    return forward, backward


def bloom_alibi(slip=None):
    """BLOOM's ALiBi: + m_h j, the key's position, one [H, 1, M] row for every query (under the
    causal mask's softmax the same weights as - m_h (i - j))."""
    def forward(scores, slopes):
        j = np.arange(scores.shape[-1])
        return scores + slopes[:, None, None] * j, j

    def backward(d_out, j):
        d_slopes = (d_out * j).sum(axis=(0, 2, 3))
        return d_out, (-d_slopes if slip == "slope sign" else d_slopes)
    return forward, backward


# == the table ===========================================================================================
# id: (component, factory, its options, the convention the report must name, the slip, and what the
# slip's report must show: the catalogued mistake it computes, or None when being caught is enough)
SWAPPED = "attention_backward: d_q and d_k swapped"    # named from the backward's structure
# named from the formulas of the convention's own backward (eps after the root), not the catalogue
NO_MEAN_PATH = "layernorm_backward: d_x without the term `d_xhat.mean(axis=-1, keepdims=True)`"
COMPONENT_CASES = {
    "annotated-layernorm": ("layernorm", annotated_layernorm, {},
                            {"variance": "unbiased", "eps": "outside sqrt"}, "no mean path", NO_MEAN_PATH),
    "unbiased-layernorm": ("layernorm", annotated_layernorm, {"eps_outside": False},
                           {"variance": "unbiased"}, "no mean path", "layernorm-no-mean-path"),
    "eps-outside-layernorm": ("layernorm", annotated_layernorm, {"unbiased": False},
                              {"eps": "outside sqrt"}, "no mean path", NO_MEAN_PATH),
    "layernorm-1p": ("layernorm", annotated_layernorm, {"unbiased": False, "eps_outside": False, "one_plus": True},
                     {"gain": "1 + w"}, "no mean path", "layernorm-no-mean-path"),
    "paper-rmsnorm": ("rmsnorm", paper_rmsnorm, {}, {"eps": "outside sqrt"}, "no rms path",
                      "rmsnorm_backward: d_x without the term `through_rms`"),
    "gemma-rmsnorm": ("rmsnorm", paper_rmsnorm, {"eps_outside": False, "one_plus": True},
                      {"gain": "1 + w"}, "no rms path", "rmsnorm-no-rms-path"),
    "masked-fill-attention": ("attention", filled_attention, {},
                              {"fully_masked_row": "mean of values"}, "d_q and d_k returned swapped", SWAPPED),
    "finfo-min-attention": ("attention", filled_attention, {"fill": "additive finfo.min"},
                            {"mask": "additive finfo.min"}, "d_q and d_k returned swapped", SWAPPED),
    "neg-inf-attention": ("attention", filled_attention, {"fill": "additive -inf"},
                          {"fully_masked_row": "nan"}, "d_q and d_k returned swapped", SWAPPED),
    "t5-attention": ("attention", filled_attention, {"scaled": False},
                     {"scale": "none", "fully_masked_row": "mean of values"}, "d_q and d_k returned swapped", SWAPPED),
    "annotated-multi-head": ("multi_head_attention", annotated_multi_head, {},
                             {"fully_masked_row": "mean of values"}, "W_q's gradient from d_k", None),
    "folded-scale-multi-head": ("multi_head_attention", annotated_multi_head,
                                {"fill": "additive -inf", "scaled": False},
                                {"scale": "none", "fully_masked_row": "nan"}, "W_q's gradient from d_k", None),
    "vaswani-embedding": ("embedding", vaswani_embedding, {}, {"scale": "sqrt(d)"}, "gradient not scaled",
                          "Embedding.backward: the returned gradient without the factor `scale`"),
    "gemma-geglu": ("swiglu", geglu, {}, {"gate": "gelu_tanh"}, "gate's slope as sigmoid's", None),
    "glu-paper-geglu": ("swiglu", geglu, {"tanh": False}, {"gate": "gelu"}, "gate's slope as sigmoid's", None),
    "neox-partial-rotary": ("rope", neox_rotary, {}, {"fraction": 0.25}, "pass-through gets no gradient", None),
    "gptj-rotary": ("rope", gptj_rotary, {}, {"layout": "interleaved"}, "turned forward again",
                    "rope-turned-forward-again"),
    "torch-tanh-gelu": ("gelu", tanh_gelu, {}, {"approximate": "tanh"}, "half the derivative", None),
    "summed-cross-entropy": ("cross_entropy", summed_cross_entropy, {}, {"reduction": "sum"},
                             "ignored targets counted", "cross-entropy-ignored-get-gradient"),
    "bloom-alibi": ("alibi", bloom_alibi, {}, {"bias": "+ m j (the key's position)"}, "slope sign",
                    "alibi_backward: d_slopes negated"),
}
# the catalogue's names for computing in the convention itself: a slip made in the convention is not
# that "mistake" (the code's convention is no error of the slip's)
CONVENTION_AS_MISTAKE = {
    "layernorm": {"layernorm-eps-outside-sqrt", "layernorm-unbiased-variance", "layernorm-gain-plus-one"},
    "rmsnorm": {"rmsnorm-eps-outside-sqrt", "rmsnorm-gain-plus-one"},
    "attention": {"softmax-finite-mask-fill", "softmax-fully-masked-nan", "attention-forward-no-scale"},
    "multi_head_attention": {"softmax-finite-mask-fill", "softmax-fully-masked-nan", "attention-forward-no-scale"},
    "embedding": {"embedding-lookup-scaled"}, "cross_entropy": {"cross-entropy-forward-no-mean"},
    "gelu": {"gelu-forward-tanh-approximation"},
}
# what takes a quarter of a minute or more to search runs with the full tier: the slips of attention
# and of the norms under two conventions, two conventions of attention at once, a block's slip
SLOW = {"masked-fill-attention", "finfo-min-attention", "neg-inf-attention", "t5-attention", "annotated-multi-head",
        "folded-scale-multi-head", "annotated-layernorm", "unbiased-layernorm"}
SLOW_CORRECT = {"folded-scale-multi-head", "t5-attention"}
SLOW_MODULE_SLIPS = {"unbiased-layernorm-block"}


def _cases(table, slow=()):
    return [pytest.param(case, marks=[pytest.mark.full] * (case in slow)) for case in sorted(table)]


def run_component(case, slip=None):
    component, factory, options, _, _, _ = COMPONENT_CASES[case]
    return conform(component, *factory(**options, slip=slip), examples=EXAMPLES)


@pytest.mark.parametrize("case", _cases(COMPONENT_CASES, SLOW_CORRECT))
def test_correct_code_in_a_published_convention_conforms_under_it(case):
    report = run_component(case)
    expected = COMPONENT_CASES[case][3]
    assert report.verdict == "conforms under convention" and report.convention == expected, str(report)


@pytest.mark.parametrize("case", _cases(COMPONENT_CASES, SLOW))
def test_the_same_code_with_one_slip_is_caught_and_named(case):
    component, _, _, expected, slip, mistake = COMPONENT_CASES[case]
    report = run_component(case, slip)
    assert not report.ok, str(report)
    assert not named(report) & CONVENTION_AS_MISTAKE.get(component, set()), str(report)
    if mistake is not None:
        assert mistake in named(report), str(report)


# == whole blocks and models in published layouts: conform_module ========================================
# NumPy code over a params dict on the small tape autodiff of test_conform_strangers.py
from test_conform_strangers import (ACTIVATIONS, GPT2_BLOCK_MAP, Var, _ln, _torch_linear, attend,  # noqa: E402
                                    columns, may_read, merge_heads, params_module, power, rows_of,
                                    split_heads, swap)
from npformer.testing.modules import conform_module  # noqa: E402

N_HEADS, D_MODEL = 4, 16


def _layernorm(p, x, unbiased=False):
    """nn.LayerNorm over a params dict {"weight", "bias"}; ``unbiased``: torch.var's default."""
    centred = x - _mean(x)
    var = _mean(centred * centred)
    if unbiased:
        var = var * (x.data.shape[-1] / (x.data.shape[-1] - 1))
    return centred * power(var + 1e-5, -0.5) * p["weight"] + p["bias"]


def _mean(a):
    return Var(a.data.mean(-1, keepdims=True), (a,),
               lambda g: (np.broadcast_to(g / a.data.shape[-1], a.data.shape),))


def gpt2_attention(scale_by="D", fused="q|k|v"):
    """nanoGPT's CausalSelfAttention over c_attn [3d, d] (nn.Linear's [out, in]): its output
    columns q | k | v (``fused="q|k|v"``), or GPT-NeoX's query_key_value, grouped by head
    ([H, 3, D]: each head's q, k and v side by side)."""
    def attn(p, x):
        B, N, d = x.data.shape
        D = d // N_HEADS
        qkv = _torch_linear(p["c_attn"], x)
        if fused == "q|k|v":
            q, k, v = (split_heads(columns(qkv, i * d, (i + 1) * d), N_HEADS, D) for i in range(3))
        else:
            per_head = swap(_reshape(qkv, (B, N, N_HEADS, 3 * D)), 1, 2)          # [B, H, N, 3 D]
            q, k, v = (columns(per_head, i * D, (i + 1) * D) for i in range(3))
        if scale_by == "d":
            q = q * (np.sqrt(D) / np.sqrt(d))            # 1/sqrt(d) in place of 1/sqrt(D)
        return _torch_linear(p["c_proj"], merge_heads(attend(q, k, v, may_read(B, N, N, causal=True))))
    return attn


def _reshape(a, shape):
    return Var(a.data.reshape(shape), (a,), lambda g: (g.reshape(a.data.shape),))


def gpt2_mlp(p, x):
    return _torch_linear(p["c_proj"], ACTIVATIONS["gelu_tanh"](_torch_linear(p["c_fc"], x)))


def gpt2_block(residual="sequential", unbiased=False, fused="q|k|v", slip=None):
    """A GPT-2 block in nanoGPT's names: sequential (x + attn(ln_1 x), then + mlp(ln_2 h)), or
    GPT-J and GPT-NeoX's parallel residual (x + attn(ln_1 x) + mlp(ln_2 x)); its LayerNorm
    biased, or with torch.var's unbiased default; c_attn q | k | v, or grouped by head."""
    attn = gpt2_attention("d" if slip == "scores divided by sqrt(d)" else "D", fused)

    def ln(p, x):
        return _layernorm(p, x, unbiased)

    def block_(p, x):
        if residual == "parallel":
            branches = attn(p["attn"], ln(p["ln_1"], x)) + gpt2_mlp(p["mlp"], ln(p["ln_2"], x))
            return branches if slip == "residual dropped" else x + branches
        h = x + attn(p["attn"], ln(p["ln_1"], x))
        return h + gpt2_mlp(p["mlp"], ln(p["ln_2"], h))
    return block_, {"ln_1": ln, "attn": attn, "ln_2": ln, "mlp": gpt2_mlp}


NEOX_MAP = {**{k: v for k, v in GPT2_BLOCK_MAP.items() if not k.startswith("attn.c_attn")},
            "attn.c_attn.weight": ("attn.qkv.weight", "T", "per_head"),
            "attn.c_attn.bias": ("attn.qkv.bias", "per_head")}


def _rotate_every_two(a):
    """GPT-J's and Mistral's pairs (x0, x1), (x2, x3) ... turned a quarter: (-x1, x0, -x3, x2 ...)."""
    def turn(x):
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = -x[..., 1::2], x[..., 0::2]
        return out
    return Var(turn(a.data), (a,), lambda g: (-turn(g),))


def interleaved_rope(t):
    """RoPE on interleaved pairs at positions 0..N-1."""
    N, D = t.data.shape[2], t.data.shape[-1]
    theta = np.repeat(np.arange(N)[:, None] * 10000.0 ** (-np.arange(0, D, 2) / D), 2, axis=-1)
    return t * np.cos(theta) + _rotate_every_two(t) * np.sin(theta)


def llama_block(scaled=True, one_plus=False, interleaved=False, slip=None):
    """Meta's Llama layout over x @ W (attention.wq ...; feed_forward.w1, w2, w3), RoPE on half
    pairs (``interleaved``: on interleaved ones, as Mistral's reference code); ``scaled=False``:
    T5's attention without 1/sqrt(D); ``one_plus``: Gemma's RMSNorm x / rms * (1 + w)."""
    from test_conform_strangers import rope as half_rope
    rope = interleaved_rope if interleaved else half_rope
    H, H_KV = 4, 2

    def rms(x, w):
        normed = x * power(_mean(x * x) + 1e-6, -0.5)
        return normed * w + normed if one_plus else normed * w

    def attention(p, x):
        B, N, _ = x.data.shape
        D = D_MODEL // H
        q, k, v = (split_heads(x @ p[n], c, D) for n, c in (("wq", H), ("wk", H_KV), ("wv", H_KV)))
        q, k = rope(q), rope(k)
        if not scaled:
            q = q * np.sqrt(D)                 # attend divides by sqrt(D): T5 never does
        mixed = merge_heads(attend(q, k, v, may_read(B, N, N, causal=True)))
        return mixed if slip == "wo left out" else mixed @ p["wo"]

    def feed_forward(p, x):
        gate, up = x @ p["w1"], x @ p["w3"]
        if slip == "gate and up swapped":
            gate, up = up, gate
        return (ACTIVATIONS["silu"](gate) * up) @ p["w2"]

    def block_(p, x):
        h = x + attention(p["attention"], rms(x, p["attention_norm"]))
        return h + feed_forward(p["feed_forward"], rms(h, p["ffn_norm"]))
    return block_, {"attention": attention, "feed_forward": feed_forward}


LLAMA_MAP = {"attention_norm": "norm1.gamma", "ffn_norm": "norm2.gamma",
             "attention.wq": ("attn.qkv.weight", "q"), "attention.wk": ("attn.qkv.weight", "k"),
             "attention.wv": ("attn.qkv.weight", "v"), "attention.wo": "attn.out.weight",
             "feed_forward.w1": "ffn.gate.weight", "feed_forward.w3": "ffn.up.weight",
             "feed_forward.w2": "ffn.down.weight"}
GEMMA_MAP = {**LLAMA_MAP, "attention_norm": ("norm1.gamma", "1+"), "ffn_norm": ("norm2.gamma", "1+")}
LLAMA_CONFIG = {"d_model": D_MODEL, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 24}


def scaled_embeddings_gpt(slip=None):
    """A GPT in nanoGPT's names whose token rows are multiplied by sqrt(d) (Vaswani et al.,
    Gemma); its head tied to wte."""
    block_, _ = gpt2_block()

    def gpt(p, ids):
        t = p["transformer"]
        d = t["wte"]["weight"].data.shape[1]
        tokens = rows_of(t["wte"]["weight"], ids)
        x = tokens * np.sqrt(d) + rows_of(t["wpe"]["weight"], np.arange(ids.shape[1]))
        for layer in t["h"]:
            x = block_(layer, x)
        x = _ln(t["ln_f"], x)
        head = swap(t["wte"]["weight"], 0, 1)
        return x @ (head * np.sqrt(d) if slip == "head scaled too" else head)
    return gpt


# id: (kind, (subject factory, its options), weight map, config, the verdict the report must give,
# the slip, what its report must show: ("named", a catalogued mistake) or ("located", sub-modules))
MODULE_CASES = {
    "neox-parallel-block": ("gpt2_block", (gpt2_block, {"residual": "parallel"}), GPT2_BLOCK_MAP, None,
                            "conforms under convention: residual='parallel'", "residual dropped", None),
    "unbiased-layernorm-block": ("gpt2_block", (gpt2_block, {"unbiased": True}), GPT2_BLOCK_MAP, None,
                                 "conforms under convention: variance='unbiased'", "scores divided by sqrt(d)",
                                 ("named", "attention-forward-scale-by-D")),
    "neox-per-head-qkv-block": ("gpt2_block", (gpt2_block, {"fused": "per head"}), NEOX_MAP, None,
                                "conforms", "scores divided by sqrt(d)", ("named", "attention-forward-scale-by-D")),
    "t5-unscaled-block": ("llama_block", (llama_block, {"scaled": False}), LLAMA_MAP, LLAMA_CONFIG,
                          "conforms under convention: scale='none'", "wo left out", ("located", ["attn"])),
    "mistral-block": ("llama_block", (llama_block, {"interleaved": True}), LLAMA_MAP, LLAMA_CONFIG,
                      "conforms under convention: rope_layout='interleaved'", "gate and up swapped",
                      ("named", "swiglu-silu-on-the-value")),
    "gemma-norm-block": ("llama_block", (llama_block, {"one_plus": True}), GEMMA_MAP, LLAMA_CONFIG,
                         "conforms", "wo left out", ("located", ["attn"])),
    "gemma-norm-block-unmarked": ("llama_block", (llama_block, {"one_plus": True}), LLAMA_MAP, LLAMA_CONFIG,
                                  "conforms under convention: gain='1 + w'", "wo left out", ("located", ["attn"])),
    "vaswani-scaled-embeddings": ("decoder", (scaled_embeddings_gpt, {}), "nanogpt", {"ffn": "gelu_tanh"},
                                  "conforms under convention: embeddings='times sqrt(d)'", "head scaled too", None),
}


def run_module(case, slip=None):
    kind, (factory, options), weight_map, config, _, _, _ = MODULE_CASES[case]
    made = factory(**options, slip=slip)
    fn, parts = made if isinstance(made, tuple) else (made, ())
    forward, backward, own = params_module(fn, parts)
    return conform_module(kind, forward, weight_map, config, backward=backward, parts=own, seeds=(0, 1))


@pytest.mark.parametrize("case", _cases(MODULE_CASES))
def test_a_published_module_layout_conforms_with_its_convention_named(case):
    report = run_module(case)
    assert report.verdict == MODULE_CASES[case][4], str(report)


@pytest.mark.parametrize("case", _cases(MODULE_CASES, SLOW_MODULE_SLIPS))
def test_the_module_with_one_slip_is_caught_and_named_or_located(case):
    _, _, _, _, _, slip, expected = MODULE_CASES[case]
    report = run_module(case, slip)
    assert report.verdict == "does not conform", str(report)
    if expected and expected[0] == "named":
        assert report.mistake is not None and report.mistake.name == expected[1], str(report)
    elif expected:
        assert [p.ours for p in report.parts if p.differs] == expected[1], str(report)


# == scopes, and misuse said at once ===================================================================
def test_a_scope_without_fully_masked_rows_is_honoured_under_the_causal_rule():
    # NaN where a query reads nothing (-inf added to every score): declared lacking, so no drawn
    # example or corner may hold such a row, causal and left-padded ones included
    report = conform("multi_head_attention", *annotated_multi_head("additive -inf"), examples=EXAMPLES,
                     scope="no_fully_masked")
    assert report.verdict == "conforms", str(report)


def test_a_scope_word_the_component_never_declares_is_refused():
    with pytest.raises(ValueError, match="no_cached_keys"):
        conform("alibi", *bloom_alibi(), examples=EXAMPLES, scope="no_cached_keys")


def test_a_modules_own_exception_is_reported_not_raised():
    def broken(params, x):
        raise KeyError("c_attn")
    report = conform_module("gpt2_block", broken, GPT2_BLOCK_MAP)
    assert report.verdict.startswith("does not") and "KeyError" in str(report), str(report)


def test_a_name_for_a_function_is_refused_at_once():
    from npformer.testing.subject import UsageError
    with pytest.raises(UsageError, match="forward"):
        conform("softmax", "softmax_forward", None)


def test_a_forward_returning_its_cache_without_a_backward_is_refused_at_once():
    from npformer.testing.subject import UsageError

    def softmax_forward(x, axis=-1, mask=None):
        y = _softmax_rows(x)
        return y, y
    with pytest.raises(UsageError, match="backward"):
        conform("softmax", softmax_forward)


def test_an_error_in_one_check_stops_no_convention_from_being_found():
    # tanh GELU (a convention) whose backward raises on one input: the convention is still
    # found from the forward, and the error reported in the gradient's check
    forward, backward = tanh_gelu()

    def fragile_backward(dy, x):
        if x.size == 1:
            raise ValueError("one number is no batch")
        return backward(dy, x)
    report = conform("gelu", forward, fragile_backward, examples=EXAMPLES)
    assert report.convention == {"approximate": "tanh"} and not report.ok, str(report)
    assert [c.name for c in report.failures if c.kind != "property"] == ["gradient of x"], str(report)
    assert "one number is no batch" in str(report)
