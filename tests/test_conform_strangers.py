"""Every reference the verifier judges by, proven by code it did not write: right and wrong.

``conform`` and ``conform_module`` measure other people's code against npformer's references
(``npformer.testing.references``, ``layers``, ``conventions``). A reference that is wrong
(gradients returned in the wrong order, a term missing) would call correct code wrong, and no
test of npformer's own code would see it, since the reference *is* npformer's code. So each
component, layer and module kind has here an implementation written for this file from the
formulas alone, in a style people publish (cache tuples as in CS231n and llm.c, a small tape
autodiff for the layers made of layers, a params dict for whole blocks), never calling
npformer: it must conform; and the same code with one slip (``slip=...``, one line) must not,
with the slip named (the catalogued mistake that computes it) or located (the sub-module
that differs). The registry is read, not copied: a component without a pair here fails
``test_every_component_layer_and_module_kind_has_a_stranger``.

Implementations already written in other people's styles (``test_conform_styles.py``) are
reused where they fit, with a backward added where theirs was forward-only.
"""
import numpy as np
import pytest
from scipy.special import erf

from npformer.testing import conform
from npformer.testing.components import COMPONENTS, LAYERS
from npformer.testing.modules import MODULE_KINDS

pytest.importorskip("hypothesis")

from test_conform_styles import complex_rope, llama_mlp, llama_rmsnorm, named, torch_adamw  # noqa: E402

EXAMPLES = 12       # each check draws this many examples, after the component's corner cases


# == stateless maths, cache tuples in CS231n's style ==================================================
def _masked_softmax(x, axis, allowed):
    """softmax over ``axis`` of the entries ``allowed`` (broadcast), 0 elsewhere; a row with
    nothing allowed is all zeros."""
    allowed = np.broadcast_to(allowed, x.shape)
    peak = np.max(np.where(allowed, x, -np.inf), axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    e = np.where(allowed, np.exp(np.where(allowed, x, peak) - peak), 0.0)
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def softmax_pair(slip=None):
    def softmax_forward(x, axis=-1, mask=None):
        y = _masked_softmax(x, axis, True if mask is None else mask)
        return y, (y, axis)

    def softmax_backward(dy, cache):
        y, axis = cache
        if slip == "no sum term":
            return y * dy
        return y * (dy - (dy * y).sum(axis=axis, keepdims=True))
    return softmax_forward, softmax_backward


def log_softmax_pair(slip=None):
    def log_softmax_forward(x, axis=-1):
        shifted = x - x.max(axis=axis, keepdims=True)
        y = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
        return y, (y, axis)

    def log_softmax_backward(dy, cache):
        y, axis = cache
        if slip == "softmax's backward":
            return np.exp(y) * (dy - (dy * np.exp(y)).sum(axis=axis, keepdims=True))
        return dy - np.exp(y) * dy.sum(axis=axis, keepdims=True)
    return log_softmax_forward, log_softmax_backward


def relu_pair(slip=None):
    def relu_forward(x):
        return np.maximum(x, 0), x

    def relu_backward(dy, x):
        return (x > 0).astype(x.dtype) if slip == "no upstream" else dy * (x > 0)
    return relu_forward, relu_backward


def gelu_pair(slip=None):
    def gelu_forward(x):
        cdf = 0.5 * (1 + erf(x / np.sqrt(2)))
        return x * cdf, (x, cdf)

    def gelu_backward(dy, cache):
        x, cdf = cache
        pdf = np.exp(-x * x / 2) / np.sqrt(2 * np.pi)
        return dy * cdf if slip == "no x pdf" else dy * (cdf + x * pdf)
    return gelu_forward, gelu_backward


def gelu_tanh_pair(slip=None):
    c = np.sqrt(2 / np.pi)

    def gelu_tanh_forward(x):
        t = np.tanh(c * (x + 0.044715 * x ** 3))
        return 0.5 * x * (1 + t), (x, t)

    def gelu_tanh_backward(dy, cache):
        x, t = cache
        inner = c * (1 + (1 if slip == "a x^3 differentiated as a x^2" else 3) * 0.044715 * x ** 2)
        return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * inner)
    return gelu_tanh_forward, gelu_tanh_backward


def silu_pair(slip=None):
    def silu_forward(x):
        s = 1 / (1 + np.exp(-x))
        return x * s, (x, s)

    def silu_backward(dy, cache):
        x, s = cache
        return dy * s if slip == "first term only" else dy * s * (1 + x * (1 - s))
    return silu_forward, silu_backward


def linear_pair(slip=None):
    def linear_forward(x, weight, bias=None):
        y = x @ weight
        return (y if bias is None else y + bias), (x, weight, bias is not None)

    def linear_backward(dy, cache):
        x, weight, has_bias = cache
        rows, d_rows = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
        d_weight = rows.T @ d_rows
        if slip == "weight mean":
            d_weight = d_weight / len(rows)
        return dy @ weight.T, d_weight, (d_rows.sum(axis=0) if has_bias else None)
    return linear_forward, linear_backward


def embedding_pair(slip=None):
    def embedding_forward(ids, table):
        return table[ids], (ids, table.shape)

    def embedding_backward(dy, cache):
        ids, shape = cache
        d_table = np.zeros(shape)
        if slip == "fancy index add":
            d_table[ids] += dy                     # a row read twice keeps one of its gradients
        else:
            np.add.at(d_table, ids, dy)
        return None, d_table
    return embedding_forward, embedding_backward


# == attention: a causal rule, masks, GQA by repeat, blockwise ========================================
def _allowed(shape, N, M, mask, causal, window):
    """[B, H, N, M] may-read table: the mask's, and causal for queries that are the last N of M."""
    allowed = np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape).copy()
    if causal:
        query = np.arange(M - N, M)[:, None]
        key = np.arange(M)[None, :]
        allowed &= key <= query
        if window is not None:
            allowed &= key > query - window
    return allowed


def grouped_attention_pair(slip=None):
    """GQA by ``np.repeat`` over the heads, its backward summing each group of query heads."""
    def attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None):
        B, H, N, D = q.shape
        group, M = H // k.shape[1], k.shape[2]
        keys, values = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scale = 1 / np.sqrt(D) if scale is None else scale
        weights = _masked_softmax(q @ keys.swapaxes(-1, -2) * scale, -1,
                                  _allowed((B, H, N, M), N, M, mask, causal, window))
        return weights @ values, (q, keys, values, weights, scale, group)

    def attention_backward(d_out, cache):
        q, keys, values, weights, scale, group = cache
        d_weights = d_out @ values.swapaxes(-1, -2)
        d_values = weights.swapaxes(-1, -2) @ d_out
        d_scores = weights * (d_weights - (d_weights * weights).sum(-1, keepdims=True))
        d_q = d_scores @ keys if slip == "dq unscaled" else d_scores @ keys * scale
        d_keys = d_scores.swapaxes(-1, -2) @ q * scale
        B, H, M, _ = d_keys.shape
        if slip == "groups by stride":
            def fold(g): return g.reshape(B, group, H // group, M, -1).sum(axis=1)
        else:
            def fold(g): return g.reshape(B, H // group, group, M, -1).sum(axis=2)
        return d_q, fold(d_keys), fold(d_values)
    return attention_forward, attention_backward


def flash_pair(slip=None):
    """FlashAttention-2 as its paper writes it: keys a block at a time with a running max and
    sum; the backward recomputes each block's weights from the log-sum-exp, with
    delta = rowsum(dO * O)."""
    def flash_attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None, block_size=128):
        B, H, N, D = q.shape
        group, M = H // k.shape[1], k.shape[2]
        keys, values = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scale = 1 / np.sqrt(D) if scale is None else scale
        allowed = _allowed((B, H, N, M), N, M, mask, causal, window)
        out = np.zeros(q.shape[:3] + (v.shape[-1],))
        peak, total = np.full((B, H, N, 1), -np.inf), np.zeros((B, H, N, 1))
        for start in range(0, M, block_size):
            cols = slice(start, start + block_size)
            scores = np.where(allowed[..., cols], q @ keys[:, :, cols].swapaxes(-1, -2) * scale, -np.inf)
            new_peak = np.maximum(peak, scores.max(-1, keepdims=True))
            safe = np.where(np.isfinite(new_peak), new_peak, 0.0)
            p = np.exp(scores - safe)
            shrink = np.exp(np.where(np.isfinite(peak), peak, safe) - safe)
            total = total * shrink + p.sum(-1, keepdims=True)
            out = out * shrink + p @ values[:, :, cols]
            peak = new_peak
        out = out / np.where(total > 0, total, 1.0)
        lse = np.where(total > 0, peak + np.log(np.where(total > 0, total, 1.0)), -np.inf)
        return out, (q, keys, values, allowed, out, lse, scale, group, block_size)

    def flash_attention_backward(d_out, cache):
        q, keys, values, allowed, out, lse, scale, group, block_size = cache
        delta = (d_out * out).sum(-1, keepdims=True) if slip != "no delta" else 0.0
        d_q, d_keys, d_values = np.zeros_like(q), np.zeros_like(keys), np.zeros_like(values)
        for start in range(0, keys.shape[2], block_size):
            cols = slice(start, start + block_size)
            scores = q @ keys[:, :, cols].swapaxes(-1, -2) * scale
            p = np.where(allowed[..., cols] & np.isfinite(lse), np.exp(scores - np.where(np.isfinite(lse), lse, 0)), 0)
            d_values[:, :, cols] = p.swapaxes(-1, -2) @ d_out
            d_scores = p * (d_out @ values[:, :, cols].swapaxes(-1, -2) - delta)
            d_q += d_scores @ keys[:, :, cols] * scale
            d_keys[:, :, cols] = d_scores.swapaxes(-1, -2) @ q * scale
        B, H, M, _ = d_keys.shape

        def fold(g): return g.reshape(B, H // group, group, M, -1).sum(axis=2)
        return d_q, fold(d_keys), fold(d_values)
    return flash_attention_forward, flash_attention_backward


def multi_head_pair(slip=None):
    """Separate Wq, Wk, Wv (narrower for GQA), heads split by reshape and transpose."""
    attention_forward, attention_backward = grouped_attention_pair()

    def multi_head_forward(x, w_q, w_k, w_v, w_o, n_heads, mask=None, causal=False):
        B, N, _ = x.shape
        D = w_q.shape[1] // n_heads

        def split(t):
            return t.reshape(B, N, -1, D).transpose(0, 2, 1, 3)
        heads, inner = attention_forward(split(x @ w_q), split(x @ w_k), split(x @ w_v), mask=mask,
                                         causal=causal)
        if slip == "merged without transpose":
            merged = heads.reshape(B, N, -1)
        else:
            merged = heads.transpose(0, 2, 1, 3).reshape(B, N, -1)
        return merged @ w_o, (x, w_q, w_k, w_v, w_o, merged, inner)

    def multi_head_backward(d_out, cache):
        x, w_q, w_k, w_v, w_o, merged, inner = cache
        B, N, d = x.shape
        rows = x.reshape(-1, d)
        d_w_o = merged.reshape(B * N, -1).T @ d_out.reshape(B * N, -1)
        d_merged = d_out @ w_o.T
        D = inner[0].shape[-1]
        d_q, d_k, d_v = attention_backward(d_merged.reshape(B, N, -1, D).transpose(0, 2, 1, 3), inner)

        def join(g):
            return g.transpose(0, 2, 1, 3).reshape(B * N, -1)
        d_x = join(d_q) @ w_q.T + join(d_k) @ w_k.T + join(d_v) @ w_v.T
        return (d_x.reshape(x.shape), rows.T @ join(d_q), rows.T @ join(d_k), rows.T @ join(d_v), d_w_o)
    return multi_head_forward, multi_head_backward


def decode_pair(slip=None):
    """A KV cache of lists that grow by one position a step; GQA by repeat."""
    def decode_step(q_t, k_t, v_t, cache):
        keys, values = cache if cache is not None else ([], [])
        keys.append(k_t)
        values.append(k_t if slip == "keys as values" else v_t)
        k, v = np.concatenate(keys, axis=2), np.concatenate(values, axis=2)
        group = q_t.shape[1] // k.shape[1]
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        weights = _masked_softmax(q_t @ k.swapaxes(-1, -2) / np.sqrt(q_t.shape[-1]), -1, True)
        return weights @ v, (keys, values)
    return decode_step, None


# == RoPE the Hugging Face way: rotate_half =============================================================
def hf_rope_pair(slip=None):
    def rope_forward(x, positions, base=10000.0):
        D = x.shape[-1]
        theta = np.asarray(positions, np.float64)[..., None] * base ** (-np.arange(0, D, 2) / D)
        if theta.ndim == 3:
            theta = theta[:, None]
        cos, sin = np.cos(np.concatenate([theta, theta], -1)), np.sin(np.concatenate([theta, theta], -1))
        return x * cos + _rotate_half(x) * sin, (cos, sin)

    def rope_backward(d_out, cache):
        cos, sin = cache
        # out = x cos + rotate_half(x) sin, and rotate_half's transpose is -rotate_half
        if slip == "turned forward again":
            return d_out * cos + _rotate_half(d_out) * sin, None
        return d_out * cos - _rotate_half(d_out * sin), None
    return rope_forward, rope_backward


def _rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], -1)


# == norms in llm.c's style, Llama's RMSNorm with a backward ============================================
def layernorm_pair(slip=None):
    def layernorm_forward(x, gamma, beta, eps=1e-5):
        mean = x.mean(-1, keepdims=True)
        rstd = 1 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)
        norm = (x - mean) * rstd
        return norm * gamma + beta, (norm, rstd, gamma)

    def layernorm_backward(dy, cache):
        norm, rstd, gamma = cache
        dnorm = dy * gamma
        lead = tuple(range(dy.ndim - 1))
        mean_path = 0 if slip == "no mean path" else dnorm.mean(-1, keepdims=True)
        dx = (dnorm - mean_path - norm * (dnorm * norm).mean(-1, keepdims=True)) * rstd
        return dx, (dy * norm).sum(axis=lead), dy.sum(axis=lead)
    return layernorm_forward, layernorm_backward


def rmsnorm_pair(slip=None):
    """Llama's RMSNorm (``llama_rmsnorm``'s forward) and its backward."""
    def rmsnorm_forward(x, gamma, eps=1e-6):
        return llama_rmsnorm()(x, gamma, eps), (x, gamma, eps)

    def rmsnorm_backward(dy, cache):
        x, gamma, eps = cache
        rstd = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
        dnorm = dy * gamma
        rms_path = 0 if slip == "no rms path" else x * rstd ** 3 * (dnorm * x).mean(-1, keepdims=True)
        return dnorm * rstd - rms_path, (dy * x * rstd).sum(axis=tuple(range(dy.ndim - 1)))
    return rmsnorm_forward, rmsnorm_backward


# == SwiGLU: Llama's MLP with its backward =============================================================
def swiglu_pair(slip=None):
    def swiglu_forward(x, w_gate, w_up, w_down):
        return llama_mlp()(x, w_gate, w_up, w_down), (x, w_gate, w_up, w_down)

    def swiglu_backward(dy, cache):
        x, w_gate, w_up, w_down = cache
        g, u = x @ w_gate, x @ w_up
        s = 1 / (1 + np.exp(-g))
        h = g * s * u
        d_h = dy @ w_down.T
        # d silu(g) / dg = s + g s (1 - s)
        slope = s if slip == "silu slope without g s (1 - s)" else s + g * s * (1 - s)
        d_g, d_u = d_h * u * slope, d_h * g * s
        rows = x.reshape(-1, x.shape[-1])

        def outer(a, b): return a.reshape(-1, a.shape[-1]).T @ b.reshape(-1, b.shape[-1])
        return (d_g @ w_gate.T + d_u @ w_up.T, outer(rows, d_g), outer(rows, d_u), outer(h, dy))
    return swiglu_forward, swiglu_backward


# == the loss, L2 normalisation ========================================================================
def cross_entropy_pair(slip=None):
    def cross_entropy_forward(logits, targets, ignore_index=-100):
        counted = targets != ignore_index
        count = counted.sum()
        shifted = logits - logits.max(-1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        picked = np.take_along_axis(logp, np.where(counted, targets, 0)[..., None], -1)[..., 0]
        loss = -(picked * counted).sum() / max(count, 1)
        return loss, (logp, targets, counted, count)

    def cross_entropy_backward(d_loss, cache):
        logp, targets, counted, count = cache
        d_logits = np.exp(logp)
        np.put_along_axis(d_logits, np.where(counted, targets, 0)[..., None],
                          np.take_along_axis(d_logits, np.where(counted, targets, 0)[..., None], -1) - 1, -1)
        d_logits = d_logits * counted[..., None] * d_loss
        return (d_logits if slip == "no mean" else d_logits / max(count, 1)), None
    return cross_entropy_forward, cross_entropy_backward


def l2_normalize_pair(slip=None):
    def l2_normalize_forward(x, eps=1e-12):
        length = np.maximum(np.sqrt((x * x).sum(-1, keepdims=True)), eps)
        y = x / length
        return y, (y, length, length > eps)

    def l2_normalize_backward(dy, cache):
        y, length, above = cache
        if slip == "no projection":
            return dy / length
        # past the clamp, y = x / eps is linear: no projection there
        return (dy - above * y * (dy * y).sum(-1, keepdims=True)) / length
    return l2_normalize_forward, l2_normalize_backward


def adamw_pair(slip=None):
    return torch_adamw("l2" if slip else None), None


def complex_rope_pair(slip=None):
    return complex_rope("sign" if slip else None)


# == the table: each component, its stranger's code, its slip and what the report must say ============
# (factory, the slip, the catalogued mistake it must be named as, conform's keyword arguments)
COMPONENT_PAIRS = {
    "softmax": (softmax_pair, "no sum term", "softmax-no-sum-term", {}),
    "log_softmax": (log_softmax_pair, "softmax's backward", "log-softmax-as-softmax", {}),
    "relu": (relu_pair, "no upstream", "relu-no-upstream", {}),
    "gelu": (gelu_pair, "no x pdf", "gelu-no-x-phi", {}),
    "gelu_tanh": (gelu_tanh_pair, "a x^3 differentiated as a x^2", "gelu-tanh-cube-derivative", {}),
    "silu": (silu_pair, "first term only", "silu-first-term-only", {}),
    "linear": (linear_pair, "weight mean", "linear-weight-mean-over-rows", {}),
    "embedding": (embedding_pair, "fancy index add", "embedding-fancy-index-add", {}),
    "attention": (grouped_attention_pair, "dq unscaled", "attention-dq-scale", {}),
    "grouped_attention": (grouped_attention_pair, "groups by stride", "gqa-groups-by-stride", {}),
    "multi_head_attention": (multi_head_pair, "merged without transpose", "mha-merge-without-transpose", {}),
    "rope": (hf_rope_pair, "turned forward again", "rope-turned-forward-again", {}),
    "layernorm": (layernorm_pair, "no mean path", "layernorm-no-mean-path", {}),
    "rmsnorm": (rmsnorm_pair, "no rms path", "rmsnorm-no-rms-path", {}),
    "swiglu": (swiglu_pair, "silu slope without g s (1 - s)", "swiglu-gate-sigmoid-derivative", {}),
    "cross_entropy": (cross_entropy_pair, "no mean", "cross-entropy-no-mean", {}),
    "l2_normalize": (l2_normalize_pair, "no projection", "l2-normalize-no-projection", {}),
    "adamw": (adamw_pair, "the decay in the gradient", "adamw-decay-coupled", {}),
    "flash_attention": (flash_pair, "no delta", "flash-no-delta", {}),
    "kv_decode": (decode_pair, "keys as values", "kv-cache-keys-stored-as-values", {}),
}


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_a_strangers_component_conforms(name):
    make, _, _, options = COMPONENT_PAIRS[name]
    report = conform(name, *make(), examples=EXAMPLES, **options)
    assert report.verdict == "conforms", str(report)


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_its_one_line_slip_is_named(name):
    make, slip, mistake, options = COMPONENT_PAIRS[name]
    report = conform(name, *make(slip), examples=EXAMPLES, **options)
    assert not report.ok and mistake in named(report), str(report)


# == a report is truthy exactly when it is a pass =====================================================
def test_assert_conform_fails_on_code_that_does_not_conform():
    # the pytest user's ``assert conform(...)``: a failing report must not read as a pass
    wrong_forward, wrong_backward = swiglu_pair("silu slope without g s (1 - s)")
    with pytest.raises(AssertionError):
        assert conform("swiglu", wrong_forward, wrong_backward, examples=EXAMPLES)
    assert conform("swiglu", *swiglu_pair(), examples=EXAMPLES)


def test_assert_gradcheck_fails_on_a_wrong_backward():
    from npformer.testing import gradcheck
    x = np.random.default_rng(0).standard_normal((2, 3))
    right, wrong = softmax_pair(), softmax_pair("no sum term")
    assert gradcheck(right, x)
    with pytest.raises(AssertionError):
        assert gradcheck(wrong, x)
