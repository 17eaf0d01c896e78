"""What a report prints: each cause said once, in words a verifier can check by hand.

The numbers here are chosen so the right wording follows from arithmetic alone: a tensor
1.0005 times another, a scalar loss doubled, a gradient reshaped where it should be transposed.
"""
import re

import numpy as np
import pytest

from npformer.testing import conform
from npformer.testing.compare import compare_tensor

pytest.importorskip("hypothesis")
EXAMPLES = 20
EPS = 1e-5


def fixed_eps_layernorm():
    """LayerNorm with eps fixed at 1e-5 (no eps argument), written from its formulas."""
    def forward(x, gamma, beta):
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        xhat = (x - mu) / np.sqrt(var + EPS)
        return gamma * xhat + beta, (xhat, var, gamma)

    def backward(d_out, cache):
        xhat, var, gamma = cache
        d_xhat = d_out * gamma
        d_x = (d_xhat - d_xhat.mean(axis=-1, keepdims=True)
               - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True)) / np.sqrt(var + EPS)
        axes = tuple(range(d_out.ndim - 1))
        return d_x, (d_out * xhat).sum(axis=axes), d_out.sum(axis=axes)
    return forward, backward


def test_a_summary_says_not_run_once_and_why():
    report = conform("layernorm", *fixed_eps_layernorm(), examples=EXAMPLES, scope="eps=1e-5")
    text = str(report)
    assert report.verdict == "conforms", text
    assert "not run: not run" not in text
    # the three eps -> 0 properties are left out, and the summary says so instead of "every property"
    assert report.summary() == ("conforms (float64, 20 examples, only eps=1e-05; 3 checks not run: it "
                                "needs eps=1e-12; forward always uses eps=1e-05)"), text


def doubled_cross_entropy():
    """The mean cross-entropy times 2 (a stray factor), forward and backward."""
    def forward(logits, targets):
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)
        return -2 * picked.sum() / targets.size, (np.exp(log_probs), targets)

    def backward(d_loss, cache):
        probs, targets = cache
        d_logits = probs.copy()
        np.put_along_axis(d_logits, targets[..., None],
                          np.take_along_axis(probs, targets[..., None], axis=-1) - 1, axis=-1)
        return 2 * d_loss * d_logits / targets.size, None
    return forward, backward


def test_a_one_number_output_gets_no_constant_factor_but_its_gradient_does():
    report = conform("cross_entropy", *doubled_cross_entropy(), examples=EXAMPLES, scope="no_ignore_index")
    output = next(c for c in report.checks if c.name == "output")
    gradient = next(c for c in report.checks if c.name == "gradient of logits")
    # any number is a multiple of any other: the loss alone shows no factor
    assert output.failure is not None and not output.failure.diagnoses, str(report)
    assert "yours is 2 times the right gradient everywhere" in " ".join(gradient.failure.diagnoses)
    text = str(report)
    assert text.count("constant factor") == 1, text


def test_a_ratio_near_one_is_printed_with_the_digits_that_differ():
    expected = np.arange(1.0, 13.0).reshape(3, 4)
    found = compare_tensor("gradient of x", expected * (1 + 2e-5), expected)
    said = " ".join(found["diagnoses"])
    assert "is 1 times" not in said and "a constant factor" not in said, said
    assert "yours is 1.00002 times the right gradient everywhere" in said


def test_values_printed_with_enough_digits_to_differ():
    expected = np.array([1 / np.sqrt(32), -0.125])                # 0.1767766953 ...
    mine = expected * np.array([1 + 3e-8, 1.0])
    found = compare_tensor("output", mine, expected, tol=1e-9)
    yours, right = re.search(r"yours (\S+), expected (\S+)$", found["message"]).groups()
    assert yours != right, found["message"]
    assert abs(float(yours) - mine[0]) < 1e-8 * mine[0] and abs(float(right) - expected[0]) < 1e-8 * expected[0]


def test_a_transpose_is_named_only_when_transposing_gives_the_right_values():
    expected = np.arange(6.0).reshape(2, 3) + 1
    transposed = compare_tensor("gradient of weight", expected.T.copy(), expected)
    assert "is the transpose of (2, 3): a missing transpose" in transposed["diagnoses"][0]
    reshaped = compare_tensor("gradient of weight", expected.reshape(3, 2), expected)
    said = reshaped["diagnoses"][0]
    assert "missing transpose" not in said and "a reshape where a transpose belongs" in said, said
