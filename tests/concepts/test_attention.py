"""Scaled dot-product attention, masks and multi-head attention: the tutorial's formula, its
example and its masks, then the variants and input checks npformer adds."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from npformer.t04_attention import (MultiHeadAttention, attention_forward, causal_mask,
                                    padding_mask, scaled_dot_product_attention,
                                    sliding_window_mask)
from support.gradients import check_gradients, gradient_checks


def reference_attention(q, k, v, allowed=None):
    """Attention written out per head with explicit loops, as in the article's formula."""
    B, H, N, D = q.shape
    out = np.zeros(q.shape[:3] + (v.shape[-1],))
    for b in range(B):
        for h in range(H):
            scores = q[b, h] @ k[b, h].T / np.sqrt(D)
            if allowed is not None:
                scores = np.where(np.broadcast_to(allowed, (B, H, N, k.shape[2]))[b, h], scores, -np.inf)
            for i in range(N):
                row = scores[i]
                if np.isfinite(row).any():
                    e = np.exp(row - row[np.isfinite(row)].max())
                    out[b, h, i] = (e / e.sum()) @ v[b, h]
    return out


@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 6), st.integers(1, 5), st.integers(0, 99))
def test_matches_the_formula_with_causal_and_padding_masks(B, H, N, D, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((B, H, N, D)) for _ in range(3))
    lengths = rng.integers(0, N + 1, B)
    allowed = causal_mask(N)[None, None] & padding_mask(lengths, N, side="left")
    out, _ = attention_forward(q, k, v, allowed)
    np.testing.assert_allclose(out, reference_attention(q, k, v, allowed), atol=1e-12)


def test_tutorial_example_by_hand():
    # q = [1, 0]; keys give scores 1 and 0; values [2, 0] and [0, 4].
    q = np.array([1.0, 0.0]).reshape(1, 1, 1, 2)
    k = np.array([[1.0, 0.0], [0.0, 1.0]]).reshape(1, 1, 2, 2)
    v = np.array([[2.0, 0.0], [0.0, 4.0]]).reshape(1, 1, 2, 2)
    out, weights = scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(weights.ravel(), [0.670, 0.330], atol=5e-4)
    np.testing.assert_allclose(out.ravel(), [1.340, 1.321], atol=5e-4)


@given(st.integers(2, 9).map(lambda p: 2 ** p), st.integers(0, 2 ** 16))
@settings(max_examples=15)
def test_scaling_keeps_score_variance_near_one(D, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, 20000, D))
    raw = np.einsum("nd,nd->n", q, k)
    assert abs(raw.var() / D - 1) < 0.1          # unscaled variance grows like D
    assert abs((raw / np.sqrt(D)).var() - 1) < 0.1
    # and npformer uses exactly 1/sqrt(D): two keys, log(w0 / w1) = (q.k0 - q.k1) / sqrt(D)
    qq, kk = q[:1].reshape(1, 1, 1, D), k[:2].reshape(1, 1, 2, D)
    _, w = scaled_dot_product_attention(qq, kk, kk)
    np.testing.assert_allclose(np.log(w[0, 0, 0, 0] / w[0, 0, 0, 1]),
                               (qq @ kk[0, 0].T).ravel() @ [1, -1] / np.sqrt(D), rtol=1e-9)


def test_causal_table_each_position_reads_itself_and_earlier():
    table = causal_mask(4)
    for i in range(4):
        for j in range(4):
            assert table[i, j] == (j <= i)
    # new queries after cached keys sit at the end
    np.testing.assert_array_equal(causal_mask(1, 5), [[True] * 5])


def test_padding_masks_left_right_and_from_key_mask():
    right = padding_mask(np.array([2, 3]), 4)[:, 0, 0]
    left = padding_mask(np.array([2, 3]), 4, side="left")[:, 0, 0]
    np.testing.assert_array_equal(right, [[1, 1, 0, 0], [1, 1, 1, 0]])
    np.testing.assert_array_equal(left, [[0, 0, 1, 1], [0, 1, 1, 1]])
    np.testing.assert_array_equal(padding_mask(key_mask=left)[:, 0, 0], left)


def test_fully_masked_query_gives_zero_output_not_nan():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, 3, 2)) for _ in range(3))
    out, _ = attention_forward(q, k, v, padding_mask(np.array([0]), 3))
    assert (out == 0).all()


@given(st.integers(1, 6), st.integers(0, 99))
def test_self_attention_without_positions_or_masks_is_permutation_equivariant(N, seed):
    rng = np.random.default_rng(seed)
    mha = MultiHeadAttention(8, 2, rng=rng).astype(np.float64)
    x = rng.standard_normal((1, N, 8))
    perm = rng.permutation(N)
    np.testing.assert_allclose(mha(x[:, perm]), mha(x)[:, perm], atol=1e-12)


def test_one_head_equals_plain_scaled_dot_product_attention():
    rng = np.random.default_rng(3)
    d, N = 6, 5
    mha = MultiHeadAttention(d, 1, rng=rng).astype(np.float64)
    x = rng.standard_normal((2, N, d))
    W = mha.qkv.weight.data
    q, k, v = (x @ W[:, i * d:(i + 1) * d] for i in range(3))
    plain = reference_attention(q[:, None], k[:, None], v[:, None], causal_mask(N))[:, 0]
    np.testing.assert_allclose(mha(x, causal_mask(N)), plain @ mha.out.weight.data, atol=1e-12)


def test_multi_head_equals_heads_computed_separately_then_concatenated():
    rng = np.random.default_rng(4)
    d, H, N = 8, 2, 4
    mha = MultiHeadAttention(d, H, rng=rng).astype(np.float64)
    x = rng.standard_normal((1, N, d))
    W, D = mha.qkv.weight.data, d // H
    heads = []
    for h in range(H):
        q = x @ W[:, h * D:(h + 1) * D]
        k = x @ W[:, d + h * D: d + (h + 1) * D]
        v = x @ W[:, 2 * d + h * D: 2 * d + (h + 1) * D]
        heads.append(reference_attention(q[:, None], k[:, None], v[:, None])[:, 0])
    np.testing.assert_allclose(mha(x), np.concatenate(heads, -1) @ mha.out.weight.data, atol=1e-12)


def test_sliding_window_mask():
    w = sliding_window_mask(5, 2)
    assert (w.sum(axis=1) == [1, 2, 2, 2, 2]).all()
    np.testing.assert_array_equal(sliding_window_mask(5, 9), causal_mask(5))


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="n_heads: width d=8 must be divisible"):
        MultiHeadAttention(8, 3, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_kv_heads"):
        MultiHeadAttention(8, 4, 3, rng=np.random.default_rng(0))
    q = np.zeros((1, 2, 3, 4))
    with pytest.raises(ValueError, match=r"mask: expected a shape that broadcasts to the scores \(1, 2, 3, 3\), got \(4, 4\)"):
        attention_forward(q, q, q, np.ones((4, 4), bool))
    with pytest.raises(TypeError, match="mask: expected a boolean"):
        attention_forward(q, q, q, np.ones((3, 3)))
    with pytest.raises(ValueError, match="lengths"):
        padding_mask(np.array([5]), 3)
    with pytest.raises(ValueError, match="window"):
        sliding_window_mask(3, 0)


@pytest.mark.parametrize("name, size, track", gradient_checks("t04_attention.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)
