"""Tolerances that know scale and zero, and presets that pin their model's conventions.

The implementations here are written for these tests in the style of published code (Hugging
Face's eager attention with its float32 softmax, a from-scratch book's GPT block with separate
biased q/k/v projections and a hand backward, GPT-2's MLP); each fact asserted is one a reader
can check by hand: a key bias's gradient is 0 because every softmax row's Jacobian sums to 0,
the tanh and exact GELU differ by up to 1.5e-3 near x = +-2.
"""
import math
import warnings

import numpy as np
import pytest

from npformer.testing import conform
from npformer.testing.compare import SCALE_FLOOR, compare_tensor
from npformer.testing.module_parts import PartCheck, note
from npformer.testing.module_report import ComparedTensor, compare_tensors
from npformer.testing.modules import conform_module

pytest.importorskip("hypothesis")
EXAMPLES = 30


# -- a tensor that is 0 in exact arithmetic -----------------------------------------------------------
def test_rounding_noise_in_a_zero_tensor_is_judged_at_the_data_scale():
    expected = np.array([6e-17, -2e-17])          # 0 in exact arithmetic, rounding left over
    noisy = np.array([4e-16, 1e-16])               # another order of the same sums
    # against its own largest entry the noise is a "relative error" of 6; against the data (size 1) it is none
    assert compare_tensor("gradient of k", noisy, expected, tol=1e-9, atol=0.0) is not None
    assert compare_tensor("gradient of k", noisy, expected, tol=1e-9, atol=0.0, scale=1.0) is None
    # a real difference is still one: 1e-6 on data of size 1 is 1e5 times float64's tolerance
    wrong = compare_tensor("gradient of k", expected + 1e-6, expected, tol=1e-9, atol=0.0, scale=1.0)
    assert wrong is not None and wrong["scaled_error"] == pytest.approx(1e-6 / SCALE_FLOOR, rel=1e-6)


def test_a_module_tensor_far_below_the_data_is_judged_at_its_scale():
    check = compare_tensors("grad attn.qkv.bias[k]", "grad k.bias", np.array([4e-16]), np.array([6e-17]), 2.0)
    assert check.error == pytest.approx(3.4e-16 / (SCALE_FLOOR * 2.0))
    # without the data's scale the old floor of 1e-12 made the same noise 3.4e-4: above float64's 1e-8
    assert compare_tensors("x", "x", np.array([4e-16]), np.array([6e-17])).error == pytest.approx(3.4e-4)


# -- Hugging Face's eager attention: float32 softmax, fully masked rows NaN --------------------------
def eager_attention(bug=False):
    """Scores in the inputs' precision plus a mask of finfo(dtype).min (float64's: -inf once
    cast), the softmax in float32, cast back; the backward as autograd would run it."""
    def attention(q, k, v, mask=None):
        D = q.shape[-1]
        scores = q @ k.swapaxes(-1, -2) * (D ** -1.0 if bug else D ** -0.5)
        if mask is not None:
            scores = scores + np.where(mask, 0.0, np.finfo(q.dtype).min)
        s32 = scores.astype(np.float32)
        with np.errstate(invalid="ignore"):
            e = np.exp(s32 - s32.max(axis=-1, keepdims=True))
            w32 = e / e.sum(axis=-1, keepdims=True)
        return w32.astype(q.dtype) @ v, (q, k, v, w32, D)

    def backward(d_out, cache):
        q, k, v, w32, D = cache
        d_v = w32.astype(q.dtype).swapaxes(-1, -2) @ d_out
        d_w = (d_out @ v.swapaxes(-1, -2)).astype(np.float32)
        d_s = (w32 * (d_w - (d_w * w32).sum(axis=-1, keepdims=True))).astype(q.dtype)
        d_s = d_s * (D ** -1.0 if bug else D ** -0.5)
        return d_s @ k, d_s.swapaxes(-1, -2) @ q, d_v
    return attention, backward


def test_float32_softmax_with_nan_rows_conforms_under_its_convention_at_float32():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        report = conform("attention", *eager_attention(), examples=EXAMPLES, scope="no_gqa")
    assert report.verdict == "conforms under convention", str(report)
    assert report.convention == {"fully_masked_row": "nan"} and report.dtype == "float32", str(report)
    assert "float32" in report.summary()


@pytest.mark.full
def test_float32_softmax_scaled_by_one_over_d_does_not_conform():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        report = conform("attention", *eager_attention(bug=True), examples=EXAMPLES, scope="no_gqa")
    assert not report.ok, str(report)


# -- a GPT block with separate, biased q, k, v projections and a hand backward ------------------------
C = math.sqrt(2 / math.pi)


def _layer_norm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    inv = 1 / np.sqrt((xc ** 2).mean(-1, keepdims=True) + 1e-5)
    return xc * inv * w + b, (xc * inv, inv, w)


def _layer_norm_back(d_y, cache):
    xhat, inv, w = cache
    g = d_y * w
    d_x = inv * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    return d_x, (d_y * xhat).sum((0, 1)), d_y.sum((0, 1))


def _linear(x, p):                  # nn.Linear layout: weight [out, in]
    return x @ p["weight"].T + p["bias"]


def _linear_back(d_y, x, p):
    rows_x, rows_d = x.reshape(-1, x.shape[-1]), d_y.reshape(-1, d_y.shape[-1])
    return d_y @ p["weight"], {"weight": rows_d.T @ rows_x, "bias": rows_d.sum(0)}


class BookBlock:
    """x [B, T, C]: x + attn(ln1(x)), then + mlp(ln2(x)); q, k, v heads [B, H, T, D]."""

    def __init__(self, heads):
        self.heads = heads

    def split(self, t):
        B, T, width = t.shape
        return t.reshape(B, T, self.heads, width // self.heads).transpose(0, 2, 1, 3)

    def forward(self, p, x):
        a, ln1 = _layer_norm(x, p["ln1"]["weight"], p["ln1"]["bias"])
        q, k, v = (self.split(_linear(a, p["attn"][n])) for n in ("q", "k", "v"))
        T, D = x.shape[1], q.shape[-1]
        scores = np.where(np.tril(np.ones((T, T), bool)), q @ k.swapaxes(-1, -2) / math.sqrt(D), -np.inf)
        w = np.exp(scores - scores.max(-1, keepdims=True))
        w = w / w.sum(-1, keepdims=True)
        mixed = (w @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        h = x + _linear(mixed, p["attn"]["o"])
        f, ln2 = _layer_norm(h, p["ln2"]["weight"], p["ln2"]["bias"])
        u = _linear(f, p["mlp"]["fc"])
        t = np.tanh(C * (u + 0.044715 * u ** 3))
        g = 0.5 * u * (1 + t)
        y = h + _linear(g, p["mlp"]["proj"])
        return y, (p, x, a, ln1, q, k, v, w, mixed, h, f, ln2, u, t, g)

    def backward(self, d_y, cache):
        p, x, a, ln1, q, k, v, w, mixed, h, f, ln2, u, t, g = cache
        grads = {"attn": {}, "mlp": {}}
        d_g, grads["mlp"]["proj"] = _linear_back(d_y, g, p["mlp"]["proj"])
        d_u = d_g * (0.5 * (1 + t) + 0.5 * u * (1 - t ** 2) * C * (1 + 3 * 0.044715 * u ** 2))
        d_f, grads["mlp"]["fc"] = _linear_back(d_u, f, p["mlp"]["fc"])
        d_h2, *ln2_grads = _layer_norm_back(d_f, ln2)
        grads["ln2"] = dict(zip(("weight", "bias"), ln2_grads))
        d_h = d_y + d_h2
        d_mixed, grads["attn"]["o"] = _linear_back(d_h, mixed, p["attn"]["o"])
        d_heads = self.split(d_mixed)
        D = q.shape[-1]
        d_v = w.swapaxes(-1, -2) @ d_heads
        d_w = d_heads @ v.swapaxes(-1, -2)
        d_s = w * (d_w - (d_w * w).sum(-1, keepdims=True)) / math.sqrt(D)
        merged = {n: t_.transpose(0, 2, 1, 3).reshape(x.shape) for n, t_ in
                  (("q", d_s @ k), ("k", d_s.swapaxes(-1, -2) @ q), ("v", d_v))}
        d_a = 0
        for n in ("q", "k", "v"):
            d_part, grads["attn"][n] = _linear_back(merged[n], a, p["attn"][n])
            d_a = d_a + d_part
        d_x1, *ln1_grads = _layer_norm_back(d_a, ln1)
        grads["ln1"] = dict(zip(("weight", "bias"), ln1_grads))
        return d_h + d_x1, grads


BOOK_MAP = {"ln1.weight": "norm1.gamma", "ln1.bias": "norm1.beta", "ln2.weight": "norm2.gamma",
            "ln2.bias": "norm2.beta",
            **{f"attn.{n}.weight": ("attn.qkv.weight", "T", n) for n in "qkv"},
            **{f"attn.{n}.bias": ("attn.qkv.bias", n) for n in "qkv"},
            "attn.o.weight": ("attn.out.weight", "T"), "attn.o.bias": "attn.out.bias",
            "mlp.fc.weight": ("ffn.up.weight", "T"), "mlp.fc.bias": "ffn.up.bias",
            "mlp.proj.weight": ("ffn.down.weight", "T"), "mlp.proj.bias": "ffn.down.bias"}


def test_the_key_bias_gradient_is_zero_in_exact_arithmetic():
    # scores_ij = (q_i . (k_j + b)) / sqrt(D): b adds q_i . b / sqrt(D) to a whole row, which a
    # softmax ignores; so d_b = sum_ij d_s_ij q_i / sqrt(D) with every row of d_s summing to 0
    block = BookBlock(4)
    rng = np.random.default_rng(3)
    params = {"ln1": {"weight": 1 + 0.3 * rng.standard_normal(16), "bias": 0.3 * rng.standard_normal(16)},
              "ln2": {"weight": 1 + 0.3 * rng.standard_normal(16), "bias": 0.3 * rng.standard_normal(16)},
              "attn": {n: {"weight": rng.standard_normal((16, 16)) / 4, "bias": 0.3 * rng.standard_normal(16)}
                       for n in "qkvo"},
              "mlp": {"fc": {"weight": rng.standard_normal((64, 16)) / 4, "bias": 0.3 * rng.standard_normal(64)},
                      "proj": {"weight": rng.standard_normal((16, 64)) / 8, "bias": 0.3 * rng.standard_normal(16)}}}
    y, cache = block.forward(params, rng.standard_normal((2, 5, 16)))
    _, grads = block.backward(rng.standard_normal(y.shape), cache)
    assert np.abs(grads["attn"]["k"]["bias"]).max() < 1e-14 * np.abs(grads["attn"]["q"]["bias"]).max() * 100
    assert np.abs(grads["attn"]["q"]["bias"]).max() > 0.01


def test_a_block_whose_key_bias_gradient_is_rounding_noise_conforms():
    config = {"d_model": 16, "n_heads": 4, "attn_bias": True}
    report = conform_module("gpt2_block", BookBlock(4), BOOK_MAP, config)
    assert report.verdict == "conforms", report
    assert "how they are joined" not in str(report)


# -- blaming the joining only beyond the parts' rounding ---------------------------------------------
def _part(name, error):
    return PartCheck(name, name, ComparedTensor("output", "output", error, (0,), 0.0, 0.0))


def test_the_joining_is_blamed_only_beyond_what_the_parts_rounding_explains():
    parts = [_part("attn", 2e-16), _part("ffn", 3e-16)]
    quiet = " ".join(note(parts, 1e-13))        # 1e-13 is 333 times the parts' worst: rounding grows that much
    assert "the difference is in how they are joined" not in quiet
    assert "no evidence against how they are joined" in quiet
    loud = " ".join(note(parts, 0.3))
    assert "the difference is in how they are joined" in loud


# -- presets pin their model's conventions -------------------------------------------------------------
def gpt2_mlp(exact=False):
    """GPT-2's MLP over Conv1D weights [in, out]; ``exact``: the erf GELU instead of GPT-2's tanh."""
    from scipy.special import erf

    def mlp(p, x):
        u = x @ p["c_fc"]["weight"] + p["c_fc"]["bias"]
        g = 0.5 * u * (1 + (erf(u / math.sqrt(2)) if exact else np.tanh(C * (u + 0.044715 * u ** 3))))
        return g @ p["c_proj"]["weight"] + p["c_proj"]["bias"]
    return mlp


def test_the_two_gelus_differ_where_the_check_can_see_it():
    from scipy.special import erf
    u = np.linspace(-4, 4, 8001)
    exact = 0.5 * u * (1 + erf(u / math.sqrt(2)))
    tanh = 0.5 * u * (1 + np.tanh(C * (u + 0.044715 * u ** 3)))
    assert 1e-4 < np.abs(exact - tanh).max() < 1e-2            # far above float32's tolerance


def test_the_gpt2_preset_names_the_exact_gelu_a_defect():
    assert conform_module("gpt2_mlp", gpt2_mlp(), "hf_gpt2").verdict == "conforms"
    report = conform_module("gpt2_mlp", gpt2_mlp(exact=True), "hf_gpt2")
    assert report.verdict == "does not conform", report
    assert report.mistake is not None and "ffn='gelu'" in report.mistake.name, report
    assert "GPT-2's weights were trained with the tanh GELU" in " ".join(str(report).split())
    assert str(report).split("\n")[1].startswith("  the mistake: ffn='gelu'")


def test_without_the_preset_the_exact_gelu_is_a_convention_found_or_stated():
    plain = {"c_fc.weight": "up.weight", "c_fc.bias": "up.bias", "c_proj.weight": "down.weight",
             "c_proj.bias": "down.bias"}
    found = conform_module("gpt2_mlp", gpt2_mlp(exact=True), plain)
    assert found.verdict.startswith("conforms under convention: ffn='gelu'"), found
    stated = conform_module("gpt2_mlp", gpt2_mlp(exact=True), "hf_gpt2", convention={"ffn": "gelu"})
    assert stated.verdict.startswith("conforms under convention: ffn='gelu'"), stated
    with pytest.raises(ValueError, match="convention"):
        conform_module("gpt2_mlp", gpt2_mlp(), plain, convention={"ffn": "swish"})
