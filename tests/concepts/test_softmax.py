"""Softmax: the tutorial's non-negative weights that sum to 1 and its example, then what a stable
softmax must also do (no overflow, masks, log-softmax)."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra.numpy import arrays

from npformer.t11_loss import log_softmax_forward
from npformer.t03_softmax import softmax, softmax_backward, softmax_forward
from support.gradients import check_gradients, gradient_checks

rows = arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 9)),
              elements=st.floats(-50, 50, allow_nan=False))


@given(rows)
def test_weights_are_non_negative_and_sum_to_one(x):
    w = softmax(x)
    assert (w >= 0).all()
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, rtol=1e-12)


@given(rows, st.floats(-1e3, 1e3, allow_nan=False))
def test_adding_a_constant_to_a_row_changes_nothing(x, c):
    np.testing.assert_allclose(softmax(x + c), softmax(x), atol=1e-9)


@given(st.floats(1e3, 1e300))
def test_huge_scores_do_not_overflow(big):
    w = softmax(np.array([big, big / 2, -big, 0.0]))
    assert np.isfinite(w).all()
    np.testing.assert_allclose(w, [1, 0, 0, 0], atol=1e-12)


@given(rows, st.data())
def test_masked_positions_get_exactly_zero_and_the_rest_renormalise(x, data):
    mask = data.draw(arrays(bool, x.shape))
    w = softmax(x, mask=mask)
    assert (w[~mask] == 0).all()
    for row, m, wr in zip(x, mask, w):
        if m.any():
            np.testing.assert_allclose(wr[m], softmax(row[m]), rtol=1e-12)
        else:  # fully masked row: all zeros, never NaN (documented)
            assert (wr == 0).all()


def test_fully_masked_row_gradient_is_zero_not_nan():
    x = np.random.default_rng(0).standard_normal((2, 4))
    mask = np.array([[False] * 4, [True, False, True, True]])
    y, cache = softmax_forward(x, mask=mask)
    dx = softmax_backward(np.ones_like(x) * 3.0 + x, cache)
    assert np.isfinite(dx).all() and (dx[0] == 0).all() and (dx[1, 1] == 0)


@pytest.mark.parametrize("track", ["plain", "fast"])
def test_a_nan_score_makes_its_whole_row_nan_and_leaves_the_others(track):
    """No weight of a row is known when one of its scores is NaN (documented); a masked NaN
    is never read, and another row is untouched."""
    import npformer
    x = np.array([[np.nan, 1.0, 0.0], [2.0, 1.0, 0.0], [np.nan, 1.0, 0.0]])
    mask = np.array([[True] * 3, [True] * 3, [False, True, True]])
    with npformer.track(track), np.errstate(invalid="ignore"):
        y = softmax(x, mask=mask)
    assert np.isnan(y[0]).all()
    np.testing.assert_allclose(y[1], [0.665, 0.245, 0.090], atol=5e-4)
    np.testing.assert_allclose(y[2], [0.0, 0.731, 0.269], atol=5e-4)


def test_tutorial_values():
    # logits [2, 1, 0] -> about [0.665, 0.245, 0.090]; scores [0.707, 0] -> [0.670, 0.330]
    np.testing.assert_allclose(softmax(np.array([2.0, 1.0, 0.0])), [0.665, 0.245, 0.090], atol=5e-4)
    np.testing.assert_allclose(softmax(np.array([1 / math.sqrt(2), 0.0])), [0.670, 0.330], atol=5e-4)


@given(rows)
def test_log_softmax_is_the_log_of_softmax_and_stable(x):
    out, _ = log_softmax_forward(x * 1e6)  # huge scores: still finite
    assert np.isfinite(out).all()
    np.testing.assert_allclose(np.exp(log_softmax_forward(x)[0]), softmax(x), rtol=1e-9, atol=1e-300)


def test_float32_stays_float32():
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    y, cache = softmax_forward(x, mask=x > 0)
    assert y.dtype == np.float32 and softmax_backward(x, cache).dtype == np.float32


@pytest.mark.parametrize("track", ["plain", "fast"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_with_every_target_ignored_is_positive_zero_with_zero_gradient(track, dtype):
    from npformer import track as use
    from npformer.t11_loss import IGNORE_INDEX, cross_entropy
    logits = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(dtype)
    with use(track):
        loss, d_logits = cross_entropy(logits, np.full((2, 3), IGNORE_INDEX))
    assert loss == 0 and not np.signbit(loss) and loss.dtype == dtype     # +0.0, not -0.0 or NaN
    assert d_logits.dtype == dtype and not d_logits.any()


@pytest.mark.parametrize("name, size, track", gradient_checks("t03_softmax.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)
