"""The lookup's fast backward is its plain one: the same table gradient, to the bit.

``Embedding.backward`` returns nothing; it adds into the table's gradient. So each draw
starts the gradient at the same random values (what a tied head or an earlier pass left),
runs the plain backward and the fast one from there, and compares the gradients. The fast
twin adds the same numbers in the same order as ``np.add.at`` (``npformer/fast/embedding.py``),
so they agree bit for bit, NaN and infinities included; the tracks' tolerance would be
1e-12 in float64 and 1e-5 in float32.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from npformer import Embedding, LearnedPositions, track

from support.twin_inputs import LAYOUTS, laid_out

ID_KINDS = (np.int64, np.int32, np.int16, np.uint8, np.intp)


def _backward_on(name, module, d_out, cache, start):
    """The table's gradient after ``module.backward`` on track ``name``, from ``start``."""
    module.weight.grad = start.copy(order="A")
    with track(name):
        assert module.backward(d_out, cache) is None
    return module.weight.grad


def assert_same_gradient(module, d_out, cache, rng):
    """The plain and fast backward add the same into a gradient that is not zero, and leave
    ``d_out`` and the cache's ids as they found them."""
    start = rng.standard_normal(module.weight.shape).astype(module.weight.dtype)
    d_out_before, ids_before = np.array(d_out, copy=True), np.array(cache.ids, copy=True)
    plain = _backward_on("plain", module, d_out, cache, start)
    fast = _backward_on("fast", module, d_out, cache, start)
    assert fast.dtype == plain.dtype
    assert np.array_equal(plain, fast, equal_nan=True), np.abs(plain - fast).max()
    assert np.array_equal(d_out, d_out_before, equal_nan=True)
    assert np.array_equal(cache.ids, ids_before)


@settings(max_examples=200)
@given(V=st.integers(1, 8), d=st.integers(1, 5), shape=st.lists(st.integers(0, 6), min_size=1, max_size=3),
       padding=st.booleans(), dtype=st.sampled_from([np.float32, np.float64]),
       id_kind=st.sampled_from(ID_KINDS), layout=st.sampled_from(LAYOUTS), seed=st.integers(0, 2 ** 32 - 1))
def test_the_fast_lookup_backward_adds_what_the_plain_one_adds(V, d, shape, padding, dtype, id_kind,
                                                                layout, seed):
    # few rows for many positions: ids repeat, often many times
    rng = np.random.default_rng(seed)
    padding_idx = int(rng.integers(V)) if padding else None
    module = Embedding(V, d, rng=rng, dtype=dtype, padding_idx=padding_idx)
    ids = rng.integers(0, V, shape).astype(id_kind)
    out, cache = module.forward(ids)
    d_out = laid_out(rng.standard_normal(out.shape).astype(dtype), layout, rng)
    assert_same_gradient(module, d_out, cache, rng)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_position_reading_one_id_adds_into_its_row(dtype):
    # the most repeated id there is, beside the padding row and the rows never read
    rng = np.random.default_rng(7)
    module = Embedding(5, 3, rng=rng, dtype=dtype, padding_idx=4)
    ids = np.array([[2] * 9 + [4, 0], [2, 4, 4] + [2] * 8])
    out, cache = module.forward(ids)
    d_out = rng.standard_normal(out.shape).astype(dtype)
    assert_same_gradient(module, d_out, cache, rng)
    d_out[0, 3, 1] = np.nan                       # reaches row 2 only
    d_out[1, 1] = np.inf                          # read the padding row: sends nothing back
    assert_same_gradient(module, d_out, cache, rng)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("positions", [np.arange(6), np.array([[0, 1, 2, 3, 4, 5], [5, 5, 0, 1, 1, 2]]),
                                       np.array([3, 1, 4, 0, 2, 5])], ids=["shared", "per row", "shuffled"])
def test_learned_positions_send_back_what_the_plain_backward_does(dtype, positions):
    rng = np.random.default_rng(3)
    module = LearnedPositions(8, 4, rng=rng, dtype=dtype)
    out, cache = module.forward(positions)
    assert_same_gradient(module, rng.standard_normal(out.shape).astype(dtype), cache, rng)


def test_a_gradient_laid_out_in_fortran_order_is_added_into_where_it_lies():
    rng = np.random.default_rng(5)
    module = Embedding(6, 4, rng=rng, dtype=np.float64)
    out, cache = module.forward(np.array([[1, 1, 3, 0, 1]]))
    d_out = rng.standard_normal(out.shape)
    start = np.asfortranarray(rng.standard_normal((6, 4)))
    plain = _backward_on("plain", module, d_out, cache, start)
    fast_grad = module.weight.grad = start.copy(order="F")
    with track("fast"):
        module.backward(d_out, cache)
    assert module.weight.grad is fast_grad                     # added into, not replaced
    assert np.array_equal(plain, fast_grad)
