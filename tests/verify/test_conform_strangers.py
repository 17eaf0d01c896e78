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
from npformer.specs import COMPONENTS, CONVENTIONS, LAYERS
from npformer.testing.modules import MODULE_KINDS, conform_module

pytest.importorskip("hypothesis")

from test_conform_styles import (H, H_KV, D_MODEL, LLAMA_CONFIG, LLAMA_MAP, complex_rope,  # noqa: E402
                                 llama_mlp, llama_rmsnorm, named, torch_adamw)

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


def alibi_pair(slip=None):
    # MPT's way round: the bias is m_h times (key position - query position), zero on the
    # diagonal and ever more negative further back; the queries are the last N of M positions
    def alibi_forward(scores, slopes):
        n, m = scores.shape[-2:]
        offset = np.arange(m)[None, :] - np.arange(m - n, m)[:, None]          # j - i, [N, M]
        return scores + slopes[:, None, None] * offset, offset

    def alibi_backward(d_out, offset):
        d_slopes = (d_out * offset).sum(axis=(0, 2, 3))
        return d_out, (-d_slopes if slip == "slope sign" else d_slopes)
    return alibi_forward, alibi_backward


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
    "alibi": (alibi_pair, "slope sign", "alibi-backward-slope-sign", {}),
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


# == the layers made of layers: a small tape autodiff, as "autograd from scratch" posts write it =====
class Var:
    """A value on the tape: its array, the values it was made from, and ``back(g)`` giving
    their gradients from its own."""

    def __init__(self, data, parents=(), back=None):
        self.data, self.parents, self.back, self.grad = np.asarray(data, np.float64), parents, back, None

    def __add__(self, other): return add(self, lift(other))
    def __radd__(self, other): return add(lift(other), self)
    def __sub__(self, other): return add(self, neg(lift(other)))
    def __mul__(self, other): return mul(self, lift(other))
    def __rmul__(self, other): return mul(lift(other), self)
    def __matmul__(self, other): return matmul(self, lift(other))


def lift(x):
    return x if isinstance(x, Var) else Var(x)


def backprop(root, g):
    """Every value's ``grad`` of <root, g>: the tape walked from the root back."""
    order, seen = [], set()

    def visit(v):
        if id(v) not in seen:
            seen.add(id(v))
            for p in v.parents:
                visit(p)
            order.append(v)
    visit(root)
    grads = {id(root): np.asarray(g, np.float64)}
    for v in reversed(order):
        v.grad = grads.pop(id(v), None)
        if v.grad is not None and v.back is not None:
            for p, gp in zip(v.parents, v.back(v.grad)):
                if gp is not None:
                    grads[id(p)] = grads[id(p)] + gp if id(p) in grads else gp


def _fit(g, shape):
    """g summed down to ``shape`` (undoing broadcasting)."""
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    return g.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1), keepdims=True)


def add(a, b): return Var(a.data + b.data, (a, b), lambda g: (_fit(g, a.data.shape), _fit(g, b.data.shape)))
def neg(a): return Var(-a.data, (a,), lambda g: (-g,))
def mul(a, b): return Var(a.data * b.data, (a, b), lambda g: (_fit(g * b.data, a.data.shape), _fit(g * a.data, b.data.shape)))
def detach(a): return Var(a.data)


def matmul(a, b):
    return Var(a.data @ b.data, (a, b), lambda g: (_fit(g @ np.swapaxes(b.data, -1, -2), a.data.shape),
                                                   _fit(np.swapaxes(a.data, -1, -2) @ g, b.data.shape)))


def swap(a, i, j): return Var(np.swapaxes(a.data, i, j), (a,), lambda g: (np.swapaxes(g, i, j),))
def reshape(a, shape): return Var(a.data.reshape(shape), (a,), lambda g: (g.reshape(a.data.shape),))
def mean(a): return Var(a.data.mean(-1, keepdims=True), (a,), lambda g: (np.broadcast_to(g / a.data.shape[-1], a.data.shape),))
def power(a, p): return Var(a.data ** p, (a,), lambda g: (g * p * a.data ** (p - 1),))


def columns(a, start, stop):
    def back(g):
        full = np.zeros_like(a.data)
        full[..., start:stop] = g
        return (full,)
    return Var(a.data[..., start:stop], (a,), back)


def heads(a, start, stop):
    """Heads start..stop of a [B, H, N, D]."""
    def back(g):
        full = np.zeros_like(a.data)
        full[:, start:stop] = g
        return (full,)
    return Var(a.data[:, start:stop], (a,), back)


def elementwise(f, slope):
    def op(a):
        return Var(f(a.data), (a,), lambda g: (g * slope(a.data),))
    op.slope = slope
    return op


_cdf = lambda x: 0.5 * (1 + erf(x / np.sqrt(2)))                          # noqa: E731
_tanh_u = lambda x: np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))  # noqa: E731
ACTIVATIONS = {
    "gelu": elementwise(lambda x: x * _cdf(x), lambda x: _cdf(x) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi)),
    "gelu_tanh": elementwise(lambda x: 0.5 * x * (1 + _tanh_u(x)),
                             lambda x: 0.5 * (1 + _tanh_u(x)) + 0.5 * x * (1 - _tanh_u(x) ** 2)
                             * np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * x ** 2)),
    "relu": elementwise(lambda x: np.maximum(x, 0), lambda x: (x > 0).astype(float)),
    "silu": elementwise(lambda x: x / (1 + np.exp(-x)),
                        lambda x: 1 / (1 + np.exp(-x)) * (1 + x * (1 - 1 / (1 + np.exp(-x))))),
}


def softmax(a, allowed=True):
    y = _masked_softmax(a.data, -1, allowed)
    return Var(y, (a,), lambda g: (y * (g - (g * y).sum(-1, keepdims=True)),))


def rows_of(table, ids):
    def back(g):
        d = np.zeros_like(table.data)
        np.add.at(d, ids, g)
        return (d,)
    return Var(table.data[ids], (table,), back)


def repeat_heads(a, group):
    B, H_kv = a.data.shape[:2]
    return Var(np.repeat(a.data, group, axis=1), (a,),
               lambda g: (g.reshape(B, H_kv, group, *g.shape[2:]).sum(axis=2),))


def rotate_half(a):
    def turn(x):
        half = x.shape[-1] // 2
        return np.concatenate([-x[..., half:], x[..., :half]], -1)
    return Var(turn(a.data), (a,), lambda g: (-turn(g),))


def norm(kind, x, gamma, beta=None, eps=1e-5):
    if kind == "rmsnorm":
        return x * power(mean(x * x) + eps, -0.5) * gamma
    centred = x - mean(x)
    return centred * power(mean(centred * centred) + eps, -0.5) * gamma + beta


def attend(q, k, v, allowed):
    """q [B, H, N, D] reading k, v [B, H_kv, M, D]: softmax(q k^T / sqrt(D)) v."""
    group = q.data.shape[1] // k.data.shape[1]
    k, v = repeat_heads(k, group), repeat_heads(v, group)
    return softmax(q @ swap(k, -1, -2) * (1 / np.sqrt(q.data.shape[-1])), allowed) @ v


def rope(t):
    """RoPE on half pairs (rotate_half) at positions 0..N-1."""
    N, D = t.data.shape[2], t.data.shape[-1]
    theta = np.arange(N)[:, None] * 10000.0 ** (-np.arange(0, D, 2) / D)
    theta = np.concatenate([theta, theta], -1)
    return t * np.cos(theta) + rotate_half(t) * np.sin(theta)


def split_heads(t, count, D):
    B, N = t.data.shape[:2]
    return swap(reshape(t, (B, N, count, D)), 1, 2)


def merge_heads(t):
    B, H, N, D = t.data.shape
    return reshape(swap(t, 1, 2), (B, N, H * D))


def may_read(B, N, M, mask=None, causal=False):
    allowed = np.ones((B, 1, N, M), bool) if mask is None else np.broadcast_to(mask, (B, 1, N, M))
    return allowed & (np.arange(M)[None, :] <= np.arange(N)[:, None]) if causal else allowed


# -- the layers as the verifier takes them: npformer's parameter order, the recipe as options ------
def _norm_names(prefix, kind):
    return [f"{prefix}.gamma"] + ([f"{prefix}.beta"] if kind == "layernorm" else [])


def _linear_names(prefix, bias):
    return [f"{prefix}.weight"] + ([f"{prefix}.bias"] if bias else [])


def block_names(r, cross=False):
    """The weights of a block in npformer's order (its documented layout)."""
    names = _norm_names("norm1", r["norm"]) + _linear_names("attn.qkv", r["attn_bias"]) \
        + _linear_names("attn.out", r["attn_bias"])
    if cross:
        names += _norm_names("cross_norm", r["norm"]) + _linear_names("cross_attn.q", r["attn_bias"]) \
            + _linear_names("cross_attn.kv", r["attn_bias"]) + _linear_names("cross_attn.out", r["attn_bias"])
    return names + _norm_names("norm2", r["norm"]) + _linear_names("ffn.up", r["ffn_bias"]) \
        + _linear_names("ffn.down", r["ffn_bias"])


def linear(w, prefix, x):
    y = x @ w[f"{prefix}.weight"]
    return y + w[f"{prefix}.bias"] if f"{prefix}.bias" in w else y


def self_attention(w, p, x, r, allowed, turn=False):
    H = r["n_heads"]
    H_kv, D = r["n_kv_heads"] or H, x.data.shape[-1] // H
    qkv = linear(w, f"{p}attn.qkv", x)
    q = split_heads(columns(qkv, 0, H * D), H, D)
    k = split_heads(columns(qkv, H * D, (H + H_kv) * D), H_kv, D)
    v = split_heads(columns(qkv, (H + H_kv) * D, (H + 2 * H_kv) * D), H_kv, D)
    if turn:
        q, k = rope(q), rope(k)
    return linear(w, f"{p}attn.out", merge_heads(attend(q, k, v, allowed)))


def cross_attention(w, p, x, memory, r, allowed):
    H = r["n_heads"]
    H_kv, D = r["n_kv_heads"] or H, x.data.shape[-1] // H
    kv = linear(w, f"{p}cross_attn.kv", memory)          # [k | v] along the features
    q = split_heads(linear(w, f"{p}cross_attn.q", x), H, D)
    k, v = split_heads(columns(kv, 0, H_kv * D), H_kv, D), split_heads(columns(kv, H_kv * D, 2 * H_kv * D), H_kv, D)
    return linear(w, f"{p}cross_attn.out", merge_heads(attend(q, k, v, allowed)))


def block(w, p, x, r, allowed, prenorm, turn=False, slip=None, memory=None, memory_allowed=None):
    """A Pre- or Post-Norm block (with cross-attention to ``memory`` when given)."""
    def n(name, t):
        return norm(r["norm"], t, w[f"{p}{name}.gamma"], w.get(f"{p}{name}.beta"))

    def ffn(t):
        return linear(w, f"{p}ffn.down", ACTIVATIONS[r["ffn"]](linear(w, f"{p}ffn.up", t)))

    def attn(t):
        return self_attention(w, p, t, r, allowed, turn)

    def cross(t):
        return cross_attention(w, p, t, memory, r, memory_allowed)
    if prenorm:
        h = x + attn(n("norm1", x))
        if memory is not None:
            h = (detach(h) if slip == "cross residual dropped" else h) + cross(n("cross_norm", h))
        return (detach(h) if slip == "second residual dropped" else h) + ffn(n("norm2", h))
    h = n("norm1", x + attn(x))
    if memory is not None:
        h = n("cross_norm", h + cross(h))
    return n("norm2", (detach(h) if slip == "ffn residual dropped" else h) + ffn(h))


def _padding(key_mask):
    return None if key_mask is None else np.asarray(key_mask)[:, None, None, :]


def taped(build, inputs_differentiable):
    """(forward, backward) of a layer built on the tape: ``build(inputs, weights, **recipe)``
    returns (output Var, [(name, weight Var)], extra scalar Var or None) -> the verifier's
    signature; backward gives the inputs' gradients, then every weight's, in its order."""
    def forward(*args, **recipe):
        inputs = [Var(a) if d else a for a, d in zip(args, inputs_differentiable)]
        out, named, extra = build(inputs, args[len(inputs_differentiable):], **recipe)
        return out.data, (inputs, named, out, extra)

    def backward(d_out, cache):
        inputs, named, out, extra = cache
        total = reshape(out * d_out, (1, -1)) @ np.ones((out.data.size, 1))
        if extra is not None:                       # the MoE's weighted load-balancing loss
            total = total + extra
        backprop(total, np.ones((1, 1)))
        grads = [(v.grad if v.grad is not None else np.zeros_like(v.data)) if isinstance(v, Var) else None
                 for v in inputs]
        return tuple(grads) + tuple(v.grad if v.grad is not None else np.zeros_like(v.data) for _, v in named)
    return forward, backward


def _weights(names, arrays):
    assert len(names) == len(arrays), (names, [np.shape(a) for a in arrays])
    return {n: Var(a) for n, a in zip(names, arrays)}


def moe_pair(slip=None):
    """SwiGLU experts, top-k of a softmax router renormalised over the chosen; the load-balancing
    loss E sum_e f_e P_e over the real tokens, f (the share of choices) a constant."""
    def build(inputs, arrays, n_experts=2, top_k=1, hidden=2, aux_weight=0.01, token_mask=None):
        (x,), E = inputs, n_experts
        names = ["router.weight"] + [f"experts.{e}.{part}.weight" for e in range(E) for part in ("gate", "up", "down")]
        w = _weights(names, arrays)
        flat = reshape(x, (-1, x.data.shape[-1]))
        probs = softmax(flat @ w["router.weight"])                        # [T, E]
        chosen = np.argsort(-probs.data, axis=-1, kind="stable")[:, :top_k]
        picked = np.zeros(probs.data.shape)
        np.put_along_axis(picked, chosen, 1.0, -1)
        kept = probs * picked
        total = mean(kept) * E                                            # the chosen ones' sum
        if slip == "renormalisation as a constant":
            total = detach(total)
        gates = kept * power(total, -1)
        y = None
        for e in range(E):
            p = f"experts.{e}"
            g, u = flat @ w[f"{p}.gate.weight"], flat @ w[f"{p}.up.weight"]
            out = columns(gates, e, e + 1) * ((ACTIVATIONS["silu"](g) * u) @ w[f"{p}.down.weight"])
            y = out if y is None else y + out
        real = np.ones(len(chosen), bool) if token_mask is None else np.asarray(token_mask).reshape(-1)
        n_real = max(int(real.sum()), 1)
        share = np.bincount(chosen[real].ravel(), minlength=E) / n_real  # f_e
        mean_probs = Var(real[None, :] / n_real) @ probs                 # P_e, [1, E]
        aux = mean_probs @ share[:, None] * (E * aux_weight)
        return reshape(y, x.data.shape), list(w.items()), aux
    return taped(build, (True,))


def prenorm_block_pair(slip=None, prenorm=True):
    def build(inputs, arrays, n_heads=1, n_kv_heads=None, norm="layernorm", ffn="gelu", ffn_hidden=None,
              ffn_bias=True, attn_bias=False, causal=True, mask=None):
        (x,) = inputs
        r = dict(n_heads=n_heads, n_kv_heads=n_kv_heads, norm=norm, ffn=ffn, ffn_bias=ffn_bias, attn_bias=attn_bias)
        w = _weights(block_names(r), arrays)
        B, N, _ = x.data.shape
        return block(w, "", x, r, may_read(B, N, N, mask, causal), prenorm, slip=slip), list(w.items()), None
    return taped(build, (True,))


def postnorm_block_pair(slip=None):
    return prenorm_block_pair(slip, prenorm=False)


def decoder_lm_pair(slip=None):
    def build(inputs, arrays, vocab_size=5, max_len=4, n_heads=1, n_kv_heads=None, n_layers=1,
              positions="learned", norm="layernorm", ffn="gelu", ffn_hidden=None, prenorm=True,
              tie_embeddings=True, attn_bias=False, ffn_bias=True, key_mask=None):
        (ids,) = inputs
        r = dict(n_heads=n_heads, n_kv_heads=n_kv_heads, norm=norm, ffn=ffn, ffn_bias=ffn_bias, attn_bias=attn_bias)
        names = ["tokens.weight"] + (["positions.weight"] if positions == "learned" else [])
        names += [f"blocks.{i}.{n}" for i in range(n_layers) for n in block_names(r)]
        names += _norm_names("norm", norm) + ([] if tie_embeddings else ["head.weight"])
        w = _weights(names, arrays)
        B, N = ids.shape
        x = rows_of(w["tokens.weight"], ids)
        if positions == "learned":
            x = x + rows_of(w["positions.weight"], np.arange(N))
        allowed = may_read(B, N, N, _padding(key_mask), causal=True)
        for i in range(n_layers):
            x = block(w, f"blocks.{i}.", x, r, allowed, prenorm, turn=positions == "rope")
        h = globals()["norm"](norm, x, w["norm.gamma"], w.get("norm.beta"))
        table = detach(w["tokens.weight"]) if slip == "tied head's gradient not added" else w["tokens.weight"]
        return h @ (swap(table, 0, 1) if tie_embeddings else w["head.weight"]), list(w.items()), None
    return taped(build, (False,))


def seq2seq_block_pair(slip=None):
    def build(inputs, arrays, n_heads=1, n_kv_heads=None, norm="layernorm", ffn="gelu", ffn_hidden=None,
              prenorm=True, attn_bias=True, ffn_bias=True, mask=None, memory_mask=None):
        x, memory = inputs
        r = dict(n_heads=n_heads, n_kv_heads=n_kv_heads, norm=norm, ffn=ffn, ffn_bias=ffn_bias, attn_bias=attn_bias)
        w = _weights(block_names(r, cross=True), arrays)
        (B, N, _), M = x.data.shape, memory.data.shape[1]
        y = block(w, "", x, r, may_read(B, N, N, mask, causal=True), prenorm, slip=slip, memory=memory,
                  memory_allowed=may_read(B, N, M, memory_mask))
        return y, list(w.items()), None
    return taped(build, (True, True))


def seq2seq_decoder_pair(slip=None):
    def build(inputs, arrays, vocab_size=5, max_len=4, n_heads=1, n_kv_heads=None, n_decoder_layers=1,
              positions="learned", norm="layernorm", ffn="gelu", ffn_hidden=None, prenorm=True, tie_head=True,
              logits_bias=False, attn_bias=True, ffn_bias=True, src_mask=None, tgt_mask=None):
        memory, ids = inputs
        r = dict(n_heads=n_heads, n_kv_heads=n_kv_heads, norm=norm, ffn=ffn, ffn_bias=ffn_bias, attn_bias=attn_bias)
        names = ["tokens.weight"] + (["positions.weight"] if positions == "learned" else [])
        names += [f"blocks.{i}.{n}" for i in range(n_decoder_layers) for n in block_names(r, cross=True)]
        names += (_norm_names("final_norm", norm) if prenorm else []) + ([] if tie_head else ["head.weight"])
        names += ["logits_bias"] if logits_bias else []
        w = _weights(names, arrays)
        (B, N), M = ids.shape, memory.data.shape[1]
        x = rows_of(w["tokens.weight"], ids)
        if positions == "learned":
            x = x + rows_of(w["positions.weight"], np.arange(N))
        if slip == "embeddings get no gradient":
            x = detach(x)
        allowed, reads = may_read(B, N, N, _padding(tgt_mask), causal=True), may_read(B, N, M, _padding(src_mask))
        for i in range(n_decoder_layers):
            x = block(w, f"blocks.{i}.", x, r, allowed, prenorm, turn=positions == "rope", memory=memory,
                      memory_allowed=reads)
        if prenorm:
            x = globals()["norm"](norm, x, w["final_norm.gamma"], w.get("final_norm.beta"))
        logits = x @ (swap(w["tokens.weight"], 0, 1) if tie_head else w["head.weight"])
        return (logits + w["logits_bias"] if logits_bias else logits), list(w.items()), None
    return taped(build, (True, False))


LAYER_PAIRS = {
    "moe": (moe_pair, "renormalisation as a constant", "moe-renormalisation-as-constant"),
    "prenorm_block": (prenorm_block_pair, "second residual dropped", "prenorm-second-residual-dropped"),
    "postnorm_block": (postnorm_block_pair, "ffn residual dropped", "postnorm-ffn-residual-dropped"),
    "decoder_lm": (decoder_lm_pair, "tied head's gradient not added", "tied-head-table-never-added"),
    "seq2seq_block": (seq2seq_block_pair, "cross residual dropped", "decoder-block-cross-residual-dropped"),
    "seq2seq_decoder": (seq2seq_decoder_pair, "embeddings get no gradient", "decode-embeddings-skipped"),
}
LAYER_EXAMPLES = 8


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_a_strangers_layer_conforms(name):
    make, _, _ = LAYER_PAIRS[name]
    report = conform(name, *make(), examples=LAYER_EXAMPLES)
    assert report.verdict == "conforms", str(report)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_its_one_line_slip_is_named_too(name):
    make, slip, mistake = LAYER_PAIRS[name]
    report = conform(name, *make(slip), examples=LAYER_EXAMPLES)
    assert not report.ok and mistake in named(report), str(report)


# == whole modules through a weight map: nanoGPT's and Meta's layouts over a params dict ==============
def _tree(node, leaf):
    if isinstance(node, dict):
        return {k: _tree(v, leaf) for k, v in node.items()}
    if isinstance(node, list):
        return [_tree(v, leaf) for v in node]
    return leaf(node)


def params_module(fn, parts=()):
    """NumPy code over a params dict as ``conform_module`` takes it: ``forward(params, x) ->
    (out, cache)``, ``backward(d_out, cache) -> (d_x, grads dict)``, and ``parts``, each
    sub-module alone as ``fn(params, x) -> out``."""
    def forward(params, x):
        P = _tree(params, Var)
        X = Var(x) if np.issubdtype(np.asarray(x).dtype, np.floating) else x
        out = fn(P, X)
        return out.data, (P, X, out)

    def backward(d_out, cache):
        P, X, out = cache
        backprop(out, d_out)
        grads = _tree(P, lambda v: v.grad if v.grad is not None else np.zeros_like(v.data))
        return (X.grad if isinstance(X, Var) else None), grads
    own = {name: (lambda part: lambda params, x: part(_tree(params, Var), Var(x)).data)(part)
           for name, part in dict(parts).items()}
    return forward, backward, own


def _torch_linear(p, x):                  # nn.Linear: weight [out, in]
    y = x @ swap(p["weight"], 0, 1)
    return y + p["bias"] if "bias" in p else y


def _ln(p, x):
    return norm("layernorm", x, p["weight"], p["bias"])


def nanogpt_mlp(slip=None):
    def gelu_new(t):
        if slip == "gelu without its half":
            return elementwise(lambda x: x * (1 + _tanh_u(x)), lambda x: 2 * ACTIVATIONS["gelu_tanh"].slope(x))(t)
        return ACTIVATIONS["gelu_tanh"](t)

    def mlp(p, x):
        return _torch_linear(p["c_proj"], gelu_new(_torch_linear(p["c_fc"], x)))
    return mlp


def nanogpt_attention(n_heads, slip=None):
    def attn(p, x):
        B, N, d = x.data.shape
        D = d // n_heads
        qkv = _torch_linear(p["c_attn"], x)
        q, k, v = (split_heads(columns(qkv, i * d, (i + 1) * d), n_heads, D) for i in range(3))
        merged = merge_heads(attend(q, k, v, may_read(B, N, N, causal=True)))
        if slip == "c_proj's bias forgotten":
            return merged @ swap(p["c_proj"]["weight"], 0, 1)
        return _torch_linear(p["c_proj"], merged)
    return attn


def nanogpt_block(n_heads=4, slip=None):
    attn, mlp = nanogpt_attention(n_heads, slip), nanogpt_mlp(slip)

    def block_(p, x):
        x = x + attn(p["attn"], _ln(p["ln_1"], x))
        return x + mlp(p["mlp"], _ln(p["ln_2"], x))
    return block_, {"ln_1": _ln, "attn": attn, "ln_2": _ln, "mlp": mlp}


def nanogpt(n_heads=4, slip=None):
    block_, _ = nanogpt_block(n_heads)

    def gpt(p, ids):
        t = p["transformer"]
        x = rows_of(t["wte"]["weight"], ids) + rows_of(t["wpe"]["weight"], np.arange(ids.shape[1]))
        for layer in t["h"]:
            x = block_(layer, x)
        x = _ln(t["ln_f"], x)
        head = swap(t["wte"]["weight"], 0, 1)
        return x @ (head * (1 / np.sqrt(x.data.shape[-1])) if slip == "head scaled by 1/sqrt(d)" else head)
    return gpt


def meta_llama_block(slip=None):
    """Meta's Llama layout (wq, wk, wv, wo; w1, w2, w3; attention_norm, ffn_norm), x @ w."""
    def rms(x, w):
        return norm("rmsnorm", x, w, eps=1e-6)

    def attention(p, x):
        B, N, _ = x.data.shape
        D = D_MODEL // H
        q, k, v = (split_heads(x @ p[n], c, D) for n, c in (("wq", H), ("wk", H_KV), ("wv", H_KV)))
        mixed = merge_heads(attend(rope(q), rope(k), v, may_read(B, N, N, causal=True)))
        return mixed if slip == "wo left out" else mixed @ p["wo"]

    def feed_forward(p, x):
        return (ACTIVATIONS["silu"](x @ p["w1"]) * (x @ p["w3"])) @ p["w2"]

    def block_(p, x):
        h = x + attention(p["attention"], rms(x, p["attention_norm"]))
        return h + feed_forward(p["feed_forward"], rms(h, p["ffn_norm"]))
    return block_, {"attention": attention, "feed_forward": feed_forward}


GPT2_MLP_MAP = {"c_fc.weight": ("up.weight", "T"), "c_fc.bias": "up.bias",
                "c_proj.weight": ("down.weight", "T"), "c_proj.bias": "down.bias"}
GPT2_BLOCK_MAP = {"ln_1.weight": "norm1.gamma", "ln_1.bias": "norm1.beta", "ln_2.weight": "norm2.gamma",
                  "ln_2.bias": "norm2.beta", "attn.c_attn.weight": ("attn.qkv.weight", "T"),
                  "attn.c_attn.bias": "attn.qkv.bias", "attn.c_proj.weight": ("attn.out.weight", "T"),
                  "attn.c_proj.bias": "attn.out.bias",
                  **{f"mlp.{k}": (f"ffn.{v[0]}", "T") if isinstance(v, tuple) else f"ffn.{v}"
                     for k, v in GPT2_MLP_MAP.items()}}


def _module(kind, slip=None):
    """(subject's forward, backward, parts, weight map, config) of ``kind``'s stranger."""
    if kind == "gpt2_mlp":
        return (*params_module(nanogpt_mlp(slip)), GPT2_MLP_MAP, None)
    if kind == "gpt2_block":
        return (*params_module(*nanogpt_block(slip=slip)), GPT2_BLOCK_MAP, None)
    if kind == "llama_block":
        return (*params_module(*meta_llama_block(slip)), LLAMA_MAP, LLAMA_CONFIG)
    if kind == "decoder":
        return (*params_module(nanogpt(slip=slip)), "nanogpt", {"ffn": "gelu_tanh"})
    raise KeyError(kind)


# kind: (the slip, ("named", the catalogued mistake) or ("located", the sub-modules that differ))
MODULE_PAIRS = {
    "gpt2_mlp": ("gelu without its half", ("named", "gelu-tanh-forward-without-half")),
    "gpt2_block": ("c_proj's bias forgotten", ("located", ["attn"])),
    "llama_block": ("wo left out", ("located", ["attn"])),
    "decoder": ("head scaled by 1/sqrt(d)", ("named", "tied-head-forward-scaled")),
}


def _conform_module(kind, slip=None):
    forward, backward, parts, weight_map, config = _module(kind, slip)
    return conform_module(kind, forward, weight_map, config, backward=backward, parts=parts, seeds=(0, 1))


@pytest.mark.parametrize("kind", MODULE_KINDS)
def test_a_strangers_module_conforms_gradients_included(kind):
    report = _conform_module(kind)
    assert report.verdict == "conforms", str(report)
    assert "gradient" in report.checked and "not compared" not in report.checked, str(report)


@pytest.mark.parametrize("kind", MODULE_KINDS)
def test_its_one_line_slip_is_named_or_located(kind):
    slip, (how, what) = MODULE_PAIRS[kind]
    report = _conform_module(kind, slip)
    assert not report and report.verdict == "does not conform", str(report)
    if how == "named":
        assert report.mistake is not None and report.mistake.name == what, str(report)
    else:
        assert [p.ours for p in report.parts if p.differs] == list(what), str(report)


# == code in the usual conventions: each of conventions.py's variants proven by a stranger ===========
def naive_softmax_pair(fill):
    """Masked scores set to -inf ("nan": a fully masked row gives NaN, as the naive code does),
    to the float minimum (masked_fill(finfo.min): such a row is uniform, its gradient 0), or
    a finite number added to them (an additive mask)."""
    def forward(x, axis=-1, mask=None):
        allowed = np.ones(x.shape, bool) if mask is None else np.broadcast_to(mask, x.shape)
        if fill == "nan":
            scores = np.where(allowed, x, -np.inf)
        elif fill == "uniform":
            scores = np.where(allowed, x, np.finfo(np.float64).min)
        else:
            scores = x + np.where(allowed, 0.0, fill)
        with np.errstate(invalid="ignore"):
            e = np.exp(scores - scores.max(axis=axis, keepdims=True))
            y = e / e.sum(axis=axis, keepdims=True)
        return y, (y, axis, allowed)

    def backward(dy, cache):
        y, axis, allowed = cache
        dx = y * (dy - (dy * y).sum(axis=axis, keepdims=True))
        return np.where(allowed, dx, 0.0) if fill == "uniform" else dx
    return forward, backward


def naive_attention_pair(fill):
    """Attention whose fully masked rows are NaN (-inf scores) or the mean of the values (a
    row that reads nothing weighs every key alike), or whose mask is added to the scores."""
    def forward(q, k, v, mask=None, scale=None, causal=False, window=None):
        B, H, N, D = q.shape
        group, M = H // k.shape[1], k.shape[2]
        keys, values = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scale = 1 / np.sqrt(D) if scale is None else scale
        scores = q @ keys.swapaxes(-1, -2) * scale
        allowed = _allowed((B, H, N, M), N, M, mask, causal, window)
        if fill in ("nan", "mean"):
            with np.errstate(invalid="ignore"):
                weights = naive_softmax_pair("nan")[0](scores, -1, allowed)[0]
            if fill == "mean":
                weights = np.where(allowed.any(-1, keepdims=True), weights, 1.0 / M)
        else:
            weights = naive_softmax_pair(fill)[0](scores, -1, allowed)[0]
        return weights @ values, (q, keys, values, weights, allowed, scale, group)

    def backward(d_out, cache):
        q, keys, values, weights, allowed, scale, group = cache
        d_values = weights.swapaxes(-1, -2) @ d_out
        d_weights = d_out @ values.swapaxes(-1, -2)
        d_scores = weights * (d_weights - (d_weights * weights).sum(-1, keepdims=True))
        if fill == "mean":          # a row of equal weights does not move with its scores
            d_scores = np.where(allowed.any(-1, keepdims=True), d_scores, 0.0)
        d_q, d_keys = d_scores @ keys * scale, d_scores.swapaxes(-1, -2) @ q * scale
        B, H, M, _ = d_keys.shape

        def fold(g): return g.reshape(B, H // group, group, M, -1).sum(axis=2)
        return d_q, fold(d_keys), fold(d_values)
    return forward, backward


def summed_cross_entropy_pair():
    forward, backward = cross_entropy_pair()

    def summed_forward(logits, targets, ignore_index=-100):
        loss, cache = forward(logits, targets, ignore_index)
        return loss * max(cache[3], 1), cache

    def summed_backward(d_loss, cache):
        return backward(d_loss * max(cache[3], 1), cache)
    return summed_forward, summed_backward


def unbiased_layernorm_pair():
    """torch.var's default (d - 1) in LayerNorm's variance."""
    def forward(x, gamma, beta, eps=1e-5):
        d = x.shape[-1]
        centred = x - x.mean(-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            rstd = 1 / np.sqrt((centred ** 2).sum(-1, keepdims=True) / (d - 1) + eps)
        norm_ = centred * rstd
        return norm_ * gamma + beta, (norm_, rstd, gamma, d)

    def backward(dy, cache):
        norm_, rstd, gamma, d = cache
        dnorm, lead = dy * gamma, tuple(range(dy.ndim - 1))
        with np.errstate(invalid="ignore", divide="ignore"):
            dx = rstd * (dnorm - dnorm.mean(-1, keepdims=True) - norm_ * (dnorm * norm_).sum(-1, keepdims=True) / (d - 1))
        return dx, (dy * norm_).sum(axis=lead), dy.sum(axis=lead)
    return forward, backward


def eps_outside_layernorm_pair():
    """(x - mean) / (std + eps), as the annotated Transformer writes it."""
    def forward(x, gamma, beta, eps=1e-5):
        centred = x - x.mean(-1, keepdims=True)
        std = np.sqrt((centred ** 2).mean(-1, keepdims=True))
        return centred / (std + eps) * gamma + beta, (centred, std, eps, gamma)

    def backward(dy, cache):
        centred, std, eps, gamma = cache
        dnorm, lead = dy * gamma, tuple(range(dy.ndim - 1))
        through_std = centred * (dnorm * centred).mean(-1, keepdims=True) / (np.where(std > 0, std, np.inf) * (std + eps) ** 2)
        dx = (dnorm - dnorm.mean(-1, keepdims=True)) / (std + eps) - through_std
        return dx, (dy * centred / (std + eps)).sum(axis=lead), dy.sum(axis=lead)
    return forward, backward


def uncorrected_adamw_pair():
    """AdamW as some write it: no bias correction of m and v."""
    def update(data, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        b1, b2 = betas
        m, v = b1 * m + (1 - b1) * grad, b2 * v + (1 - b2) * grad ** 2
        return data * (1 - lr * weight_decay) - lr * m / (np.sqrt(v) + eps), m, v
    return update, None


# (component, the convention as conventions.describe says it): the stranger's code in it
def bloom_alibi_pair():
    # BLOOM's way: a row of key positions 0 .. M-1 times each head's slope, one [H, 1, M] bias
    # broadcast over every query (each row is shifted by m_h i from MPT's: the same softmax)
    def alibi_forward(scores, slopes):
        positions = np.arange(scores.shape[-1]).reshape(1, 1, -1)
        return scores + slopes.reshape(-1, 1, 1) * positions, positions

    def alibi_backward(d_out, positions):
        return d_out, np.einsum("bhnm,hnm->h", d_out, np.broadcast_to(positions, d_out.shape[1:]))
    return alibi_forward, alibi_backward


CONVENTION_PAIRS = {
    ("alibi", 'bias="+ m j (the key\'s position)"'): bloom_alibi_pair,
    ("gelu", "approximate='tanh'"): gelu_tanh_pair,
    ("gelu_tanh", "approximate='none'"): gelu_pair,
    ("cross_entropy", "reduction='sum'"): summed_cross_entropy_pair,
    ("layernorm", "variance='unbiased'"): unbiased_layernorm_pair,
    ("layernorm", "eps='outside sqrt'"): eps_outside_layernorm_pair,
    ("adamw", "bias_correction=False"): uncorrected_adamw_pair,
    ("softmax", "fully_masked_row='uniform'"): lambda: naive_softmax_pair("uniform"),
    ("softmax", "fully_masked_row='nan'"): lambda: naive_softmax_pair("nan"),
    **{("softmax", f"mask='additive {fill}'"): (lambda fill: lambda: naive_softmax_pair(float(fill)))(fill)
       for fill in ("-1e9", "-1e4", "-1e10")},
    **{(name, said): (lambda fill: lambda: naive_attention_pair(fill))(fill)
       for name in ("attention", "grouped_attention")
       for said, fill in [("fully_masked_row='mean of values'", "mean"), ("fully_masked_row='nan'", "nan")]
       + [(f"mask='additive {f}'", float(f)) for f in ("-1e9", "-1e4", "-1e10")]},
}


def _published(name, **options):
    """A stranger of test_conform_conventions.py in one convention (imported when it is made:
    that file imports this one)."""
    def make():
        import test_conform_conventions as published
        return getattr(published, name)(**options)
    return make


CONVENTION_PAIRS.update({
    ("softmax", "mask='additive finfo.min'"): lambda: naive_softmax_pair(float(np.finfo(np.float64).min)),
    **{(name, "mask='additive finfo.min'"): (lambda: naive_attention_pair(float(np.finfo(np.float64).min)))
       for name in ("attention", "grouped_attention")},
    ("attention", "scale='none'"): _published("filled_attention", fill="zero", scaled=False),
    ("grouped_attention", "scale='none'"): _published("annotated_grouped", scaled=False),
    ("layernorm", "gain='1 + w'"): _published("annotated_layernorm", unbiased=False, eps_outside=False, one_plus=True),
    ("rmsnorm", "eps='outside sqrt'"): _published("paper_rmsnorm"),
    ("rmsnorm", "gain='1 + w'"): _published("paper_rmsnorm", eps_outside=False, one_plus=True),
    ("embedding", "scale='sqrt(d)'"): _published("vaswani_embedding"),
    ("swiglu", "gate='gelu'"): _published("geglu", tanh=False),
    ("swiglu", "gate='gelu_tanh'"): _published("geglu"),
    ("rope", "fraction=0.5"): _published("neox_rotary", fraction=0.5),
    ("rope", "fraction=0.25"): _published("neox_rotary"),
    ("multi_head_attention", "fully_masked_row='mean of values'"): _published("annotated_multi_head"),
    ("multi_head_attention", "fully_masked_row='nan'"): _published("annotated_multi_head", fill="additive -inf"),
    **{("multi_head_attention", f"mask='additive {fill}'"): _published("annotated_multi_head", fill=f"additive {fill}")
       for fill in ("-1e9", "-1e4", "-1e10", "finfo.min")},
    ("multi_head_attention", "scale='none'"): _published("annotated_multi_head", fill="zero", scaled=False),
})


def _conventions():
    """{(component, how it is said): the convention} of every convention of the registry that
    is a variant of the reference (an option convention, RoPE's layout, is the reference's own
    option: the complex-number RoPE of test_conform_styles.py is judged under it)."""
    from npformer.testing import conventions
    return {(name, conventions.describe(said)): said for name, listed in CONVENTIONS.items()
            for said, variant in listed if variant is not None}


@pytest.mark.parametrize("name, said", sorted(_conventions()))
def test_a_strangers_code_in_a_usual_convention_conforms_under_it(name, said):
    # the convention stated up front (conform then runs the reference's variant at once; the
    # search for an unstated one is conformance's own tests' subject)
    convention = _conventions()[(name, said)]
    report = conform(name, *CONVENTION_PAIRS[(name, said)](), examples=EXAMPLES, convention=convention)
    assert report.verdict == "conforms under convention" and report.convention == convention, str(report)


def test_every_component_layer_and_module_kind_has_a_stranger():
    # read from the registries, so a component added without a stranger here fails
    assert set(COMPONENT_PAIRS) == set(COMPONENTS)
    assert set(LAYER_PAIRS) == set(LAYERS)
    assert set(MODULE_PAIRS) == set(MODULE_KINDS)
    assert set(CONVENTION_PAIRS) == set(_conventions())


@pytest.mark.parametrize("name", ["prenorm_block", "postnorm_block"])
def test_a_grouped_query_block_is_judged_as_grouped(name):
    # H = 2 query heads sharing H_kv = 1 key/value head: the reference must build the block
    # the weights are for (a draw of eight examples may not reach one), and agree with the
    # stranger's block there
    from npformer.specs.layered import all_parameters, weight_names
    from npformer.specs.t09_block import build_postnorm, build_prenorm
    recipe = dict(n_heads=2, n_kv_heads=1, norm="layernorm", ffn="gelu", ffn_hidden=3, ffn_bias=True,
                  attn_bias=False, causal=True)
    build = build_prenorm if name == "prenorm_block" else build_postnorm
    g = np.random.default_rng(5)
    shapes = [shape for _, shape in weight_names(build, all_parameters, 4, recipe)]
    assert (4, 8) in shapes              # the fused projection: q 4 wide, k and v one head of 2
    x, weights = g.standard_normal((2, 3, 4)), [g.standard_normal(s) for s in shapes]
    ours = LAYERS[name].reference_pair()[0](x, *weights, **recipe)[0]
    theirs = LAYER_PAIRS[name][0]()[0](x, *weights, **recipe)[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
