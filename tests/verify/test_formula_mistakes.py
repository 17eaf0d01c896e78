"""Mistakes named from a backward's formulas (``npformer.testing.formulas``): an operand left out
of one line, or a name read in its sibling's place, found without a catalogue entry.

Each slip below is written here, by hand, in a style of its own (never npformer's text), and
must be named by what its maths is; the edits themselves are checked against plain arithmetic.
"""
import numpy as np
import pytest

from npformer.t04_attention import attention_backward
from npformer.testing import conform
from npformer.testing.formulas import (formula_edits, omissions, reduction_axes, sign_flips, substitutions,
                                       transposes)

pytest.importorskip("hypothesis")


def named(report):
    return {c.failure.mistake.name for c in report.failures if c.failure.mistake is not None}


# == the edits, on small functions whose every variant is known ======================================
def scaled_sum(a, b, c):
    total = a * b - c / 4.0
    return total


def test_every_operand_left_out_once_computes_what_the_line_then_says():
    edits = {e.what: e.function(3.0, 5.0, 8.0) for e in omissions(scaled_sum)}
    assert edits == {"total without the term `a * b`": -2.0,       # - c / 4
                     "total without the term `c / 4.0`": 15.0,      # a * b
                     "total without the factor `a`": 3.0,           # b - c / 4
                     "total without the factor `b`": 1.0,           # a - c / 4
                     "total without the division by `4.0`": 7.0}    # a * b - c


def test_a_terms_sign_flipped_computes_the_other_sum():
    edits = {e.what: e.function(3.0, 5.0, 8.0) for e in sign_flips(scaled_sum)}
    assert edits == {"total with the term `c / 4.0` added": 17.0}


def product(a, b):
    return a @ b.T


def test_a_factor_transposed_or_its_transpose_forgotten():
    a, b = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[0.0, 1.0], [5.0, -1.0]])
    edits = {e.what: e.function(a, b) for e in transposes(product)}
    assert set(edits) == {"the returned gradient with `a` transposed", "the returned gradient with `b.T` transposed",
                          "the returned gradient without the transpose of `b`"}
    np.testing.assert_array_equal(edits["the returned gradient with `a` transposed"], a.T @ b.T)
    np.testing.assert_array_equal(edits["the returned gradient with `b.T` transposed"], a @ b)
    np.testing.assert_array_equal(edits["the returned gradient without the transpose of `b`"], a @ b)


def centred(x):
    return x - x.mean(axis=-1, keepdims=True)


def test_a_reduction_over_each_other_axis():
    x = np.array([[1.0, 3.0], [5.0, 11.0]])
    edits = {e.what: e.function(x) for e in reduction_axes(centred)}
    assert set(edits) == {f"the returned gradient reduced over axis={a}, not axis=-1" for a in ("-2", "0", "None")}
    np.testing.assert_array_equal(edits["the returned gradient reduced over axis=0, not axis=-1"],
                                  x - [[3.0, 7.0]])
    np.testing.assert_array_equal(edits["the returned gradient reduced over axis=None, not axis=-1"], x - 5.0)


def make_closure(gain):
    def backward(d_out):
        return gain * d_out + 0.5
    return backward


def test_a_closure_is_rebuilt_with_its_own_values():
    """A convention's backward is a closure: its edits keep the values it closed over."""
    edits = {e.what: e.function(2.0) for e in omissions(make_closure(10.0))}
    assert edits == {"the returned gradient without the term `gain * d_out`": 0.5,
                     "the returned gradient without the term `0.5`": 20.0,
                     "the returned gradient without the factor `gain`": 2.5,
                     "the returned gradient without the factor `d_out`": 10.5}


def projections(inputs):
    q, k, v = inputs
    d_q, d_k = q @ k.T, k @ q.T
    B, N = q.shape                      # sizes are no siblings
    return d_q + N, d_k + B, v


def test_siblings_are_the_names_written_side_by_side_and_never_sizes():
    found = {e.what for e in substitutions(projections, ("d_q", "d_k", "d_v"))}
    assert "d_q, d_k from k instead of q" in found and "d_q from d_k instead of d_q" in found
    assert not any(" instead of B" in w or " instead of N" in w for w in found), found


def test_the_edits_leave_the_original_function_as_it_was():
    q, k, v = (np.random.default_rng(i).normal(size=(1, 1, 3, 2)) for i in range(3))
    from npformer.t04_attention import attention_forward
    out, cache = attention_forward(q, k, v)
    d_out = np.ones_like(out)
    before = attention_backward(d_out, cache)
    assert len(formula_edits(attention_backward.plain, ("d_q", "d_k", "d_v"))) > 20
    for ours, again in zip(before, attention_backward(d_out, cache)):
        np.testing.assert_array_equal(ours, again)


# == slips written in other styles, named by conform ==================================================
def layernorm_without_the_mean_path():
    """LayerNorm with eps after the root, written per row; its backward forgets that the mean
    depends on every x (the direct path and the std's path are kept)."""
    def forward(x, gamma, beta, eps=1e-5):
        mu = x.mean(-1, keepdims=True)
        sigma = np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True))
        xhat = (x - mu) / (sigma + eps)
        return gamma * xhat + beta, (xhat, sigma, eps, gamma)

    def backward(dy, cache):
        xhat, sigma, eps, gamma = cache
        g = dy * gamma
        n = xhat.shape[-1]
        safe = np.where(sigma > 0, sigma, np.inf)
        dx = g / (sigma + eps) - xhat * (g * xhat).sum(-1, keepdims=True) / (n * safe)
        lead = tuple(range(dy.ndim - 1))
        return dx, (dy * xhat).sum(axis=lead), dy.sum(axis=lead)
    return forward, backward


def test_a_mean_path_forgotten_under_eps_outside_the_root_is_named_from_the_formula():
    report = conform("layernorm", *layernorm_without_the_mean_path(), examples=12)
    assert not report.ok
    assert "layernorm_backward: d_x without the term `d_xhat.mean(axis=-1, keepdims=True)`" in named(report), \
        str(report)


def test_a_sibling_in_its_place_computes_that_formula():
    """attention_backward with k read where q belongs in d_k: d_k = d_scores^T k / sqrt(D), by hand."""
    rng = np.random.default_rng(4)
    q, k, v, d_out = (rng.normal(size=(1, 2, 3, 2)) for _ in range(4))
    from npformer.t04_attention import attention_forward
    _, cache = attention_forward(q, k, v)
    edit = next(e for e in substitutions(attention_backward.plain, ("d_q", "d_k", "d_v"))
                if e.what == "d_k from k instead of q")
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(2)
    w = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
    d_w = d_out @ v.swapaxes(-1, -2)
    d_scores = w * (d_w - (d_w * w).sum(-1, keepdims=True))
    d_q, d_k, d_v = edit.function(d_out, cache)
    np.testing.assert_allclose(d_k, d_scores.swapaxes(-1, -2) @ k / np.sqrt(2), rtol=1e-12)
    np.testing.assert_allclose(d_q, d_scores @ k / np.sqrt(2), rtol=1e-12)
    np.testing.assert_allclose(d_v, w.swapaxes(-1, -2) @ d_out, rtol=1e-12)
