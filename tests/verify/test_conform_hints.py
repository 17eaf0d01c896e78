"""Hints that are true of the code they judge: a constant factor only when the ratio is the
same on every failing example, "another cause" only after a first cause was named, the
summary's precision and scope, causality checked for code declared always causal.

Each implementation is written here from its formula; the expected wording follows from
arithmetic on it (a gradient times the row width is 3 times the right one at width 3 and 5
times at width 5: no constant factor)."""
import numpy as np
import pytest

from npformer.testing import conform
from npformer.testing.compare import compare_tensor

pytest.importorskip("hypothesis")
EXAMPLES = 25


def softmax(times=lambda x: 1.0):
    """softmax over the last axis; its backward multiplied by ``times(x)``."""
    def forward(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        y = e / e.sum(-1, keepdims=True)
        return y, (y, times(x))

    def backward(d_y, cache):
        y, factor = cache
        return factor * y * (d_y - (d_y * y).sum(-1, keepdims=True))
    return forward, backward


def _gradient(report):
    return next(c for c in report.checks if c.name == "gradient of x")


def test_a_factor_that_holds_on_every_example_is_named():
    report = conform("softmax", *softmax(lambda x: 2.0), examples=EXAMPLES)
    said = " ".join(_gradient(report).failure.diagnoses)
    assert "yours is 2 times the right gradient everywhere" in said, str(report)


def test_a_factor_that_changes_with_the_example_is_not_called_constant():
    # times the row width: 2 times at width 2, 3 times at width 3 ... one example alone would say "2 times"
    report = conform("softmax", *softmax(lambda x: float(x.shape[-1])), examples=EXAMPLES)
    assert not report.ok
    assert "times the right gradient" not in str(report) and "constant factor" not in str(report), str(report)


def test_a_multiple_by_the_shape_of_a_tiny_example_is_no_factor():
    pattern = np.array([0.5, -0.5, 0.5])                # one direction: any multiple fits it
    found = compare_tensor("gradient of x", 1.7 * pattern, pattern)
    assert not any("times" in d for d in found["diagnoses"]), found
    spread = np.array([0.5, -1.25, 2.0])                 # three magnitudes: a multiple says something
    found = compare_tensor("gradient of x", 1.7 * spread, spread)
    assert any("yours is 1.7 times the right gradient" in d for d in found["diagnoses"]), found


def layernorm_with_two_faults():
    """Right output; a backward whose gradients of gamma and beta keep a position axis
    (the wrong shape) and whose d_x multiplies by a matrix that breaks on two positions."""
    def forward(x, gamma, beta, eps=1e-5):
        mu = x.mean(-1, keepdims=True)
        xhat = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
        return gamma * xhat + beta, x

    def backward(d_out, x):
        return d_out @ x.swapaxes(-1, -2), d_out, d_out
    return forward, backward


def test_another_failure_of_an_unnamed_first_one_is_not_called_another_cause():
    report = conform("layernorm", *layernorm_with_two_faults(), examples=EXAMPLES)
    text = str(report)
    assert not report.ok
    assert "another cause" not in text, text            # nothing was named to be the first cause
    assert all(c.failure.mistake is None for c in report.failures)


def test_the_summary_says_the_precision_and_the_scope():
    report = conform("softmax", *softmax(), examples=EXAMPLES)
    assert report.summary().startswith("conforms (float64, 25 examples; "), report.summary()
    scoped = conform("softmax", *softmax(), examples=EXAMPLES, precision="float32")
    assert scoped.summary().startswith("conforms (float32, 25 examples"), scoped.summary()


# -- multi-head attention declared always causal --------------------------------------------------
def always_causal_multi_head(causal=True):
    """x [B, N, d] -> out: H heads of width d / H, a lower-triangular mask when ``causal``."""
    def forward(x, w_q, w_k, w_v, w_o, n_heads):
        B, N, d = x.shape
        H = n_heads
        D = w_q.shape[1] // H
        H_kv = w_k.shape[1] // D

        def heads(t, count):
            return t.reshape(B, N, count, D).transpose(0, 2, 1, 3)
        q, k, v = heads(x @ w_q, H), heads(x @ w_k, H_kv), heads(x @ w_v, H_kv)
        k, v = np.repeat(k, H // H_kv, axis=1), np.repeat(v, H // H_kv, axis=1)
        scores = q @ k.swapaxes(-1, -2) / np.sqrt(D)
        if causal:
            scores = np.where(np.tril(np.ones((N, N), bool)), scores, -np.inf)
        w = np.exp(scores - scores.max(-1, keepdims=True))
        w = w / w.sum(-1, keepdims=True)
        return (w @ v).transpose(0, 2, 1, 3).reshape(B, N, H * D) @ w_o
    return forward


def test_code_declared_always_causal_is_checked_for_causality():
    report = conform("multi_head_attention", always_causal_multi_head(), examples=EXAMPLES,
                     scope="causal=True")
    causal = next(c for c in report.checks if c.name.startswith("causal:"))
    assert causal.passed and causal.examples > 0, str(report)
    assert "takes no causal" not in str(report)
    assert report.ok, str(report)


def test_code_declared_causal_that_is_not_fails_the_causality_check():
    report = conform("multi_head_attention", always_causal_multi_head(causal=False), examples=EXAMPLES,
                     scope="causal=True")
    causal = next(c for c in report.checks if c.name.startswith("causal:"))
    assert causal.failure is not None, str(report)
