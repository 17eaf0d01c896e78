"""Activations against independent references: math.erf, the formula written out, and limits."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from npformer.t06_activations import gelu_forward, gelu_tanh_forward, relu_forward, silu_forward
from support.gradients import check_gradients, gradient_checks

xs = st.lists(st.floats(-20, 20, allow_nan=False), min_size=1, max_size=20).map(np.array)


@given(xs)
def test_gelu_exact_matches_math_erf(x):
    ref = [v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x]
    np.testing.assert_allclose(gelu_forward(x)[0], ref, rtol=1e-12, atol=1e-300)


@given(xs)
def test_gelu_tanh_is_close_to_exact_and_matches_its_formula(x):
    ref = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))) for v in x]
    np.testing.assert_allclose(gelu_tanh_forward(x)[0], ref, rtol=1e-12, atol=1e-12)  # 1 + tanh cancels
    assert np.abs(gelu_tanh_forward(x)[0] - gelu_forward(x)[0]).max() < 1e-3


@given(xs)
def test_silu_and_relu(x):
    np.testing.assert_allclose(silu_forward(x)[0], [v / (1 + math.exp(-v)) for v in x], rtol=1e-12)
    np.testing.assert_array_equal(relu_forward(x)[0], [max(v, 0.0) for v in x])


def test_float32_in_float32_out():
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    for f in (gelu_forward, gelu_tanh_forward, relu_forward, silu_forward):
        assert f(x)[0].dtype == np.float32


def test_relu_slope_at_exactly_zero_is_zero():
    # ReLU has no derivative at 0; the subgradient 0 is the one PyTorch's relu takes too
    from npformer.t06_activations import relu_backward
    y, cache = relu_forward(np.array([-1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(relu_backward(np.array([5.0, 5.0, 5.0]), cache), [0.0, 0.0, 5.0])


@pytest.mark.parametrize("name, size, track", gradient_checks("t06_activations.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)
