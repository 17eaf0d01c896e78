"""LayerNorm and RMSNorm: the statistics the tutorial states (zero mean and unit variance, unit
RMS, its [1, 3] example), and the invariances that follow from them."""
import numpy as np
import pytest
from hypothesis import assume, given, strategies as st
from hypothesis.extra.numpy import arrays

from npformer.t08_norm import LayerNorm, RMSNorm
from support.gradients import check_gradients, gradient_checks

vectors = arrays(np.float64, st.tuples(st.integers(1, 3), st.integers(2, 12)),
                 elements=st.floats(-100, 100, allow_nan=False))


@given(vectors)
def test_layernorm_zero_mean_unit_variance(x):
    assume((x.std(axis=-1) > 1e-2).all())
    y = LayerNorm(x.shape[-1], eps=0.0).astype(np.float64)(x)
    np.testing.assert_allclose(y.mean(axis=-1), 0, atol=1e-9)
    np.testing.assert_allclose(y.var(axis=-1), 1, rtol=1e-9)


@given(vectors, st.floats(0.01, 100), st.floats(-100, 100))
def test_layernorm_ignores_shift_and_positive_scale(x, a, b):
    assume((x.std(axis=-1) > 1e-2).all())
    norm = LayerNorm(x.shape[-1], eps=0.0).astype(np.float64)
    norm.gamma.data[:] = np.linspace(0.5, 2, x.shape[-1])   # non-trivial gamma and beta
    norm.beta.data[:] = np.linspace(-1, 1, x.shape[-1])
    np.testing.assert_allclose(norm(a * x + b), norm(x), atol=1e-7)


@given(vectors)
def test_rmsnorm_unit_rms(x):
    assume((np.sqrt((x * x).mean(axis=-1)) > 1e-2).all())
    y = RMSNorm(x.shape[-1], eps=0.0).astype(np.float64)(x)
    np.testing.assert_allclose(np.sqrt((y * y).mean(axis=-1)), 1, rtol=1e-9)


@given(vectors, st.floats(0.01, 100))
def test_rmsnorm_ignores_positive_scale(x, a):
    assume((np.sqrt((x * x).mean(axis=-1)) > 1e-2).all())
    norm = RMSNorm(x.shape[-1], eps=0.0).astype(np.float64)
    norm.gamma.data[:] = np.linspace(0.5, 2, x.shape[-1])
    np.testing.assert_allclose(norm(a * x), norm(x), atol=1e-9)


def test_layernorm_by_hand_beyond_the_tutorials_pair():
    """The article's [1, 3] has variance 1, where dividing by the variance and by the standard
    deviation agree; these do not. Any two distinct values become [-1, 1] (each is one standard
    deviation from their mean), and [1, 2, 3] (mean 2, variance 2/3) becomes [-sqrt(3/2), 0, sqrt(3/2)]."""
    layernorm = LayerNorm(3, eps=0.0).astype(np.float64)
    for pair in ([1.0, 5.0], [-10.0, 30.0], [0.0, 0.5]):
        np.testing.assert_allclose(LayerNorm(2, eps=0.0).astype(np.float64)(np.array([pair])),
                                   [[-1, 1]], atol=1e-12)
    np.testing.assert_allclose(layernorm(np.array([[1.0, 2.0, 3.0]])),
                               [[-np.sqrt(1.5), 0, np.sqrt(1.5)]], atol=1e-12)


def test_tutorial_values():
    x = np.array([[1.0, 3.0]])
    np.testing.assert_allclose(LayerNorm(2, eps=0.0).astype(np.float64)(x), [[-1, 1]], atol=1e-12)
    np.testing.assert_allclose(RMSNorm(2, eps=0.0).astype(np.float64)(x), [[0.447, 1.342]], atol=5e-4)
    # RMSNorm does not centre: not the same as LayerNorm
    assert RMSNorm(2, eps=0.0).astype(np.float64)(x)[0, 0] > 0


@pytest.mark.parametrize("name, size, track", gradient_checks("t08_norm.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)
