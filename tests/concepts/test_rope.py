"""Rotary position embedding: the facts the tutorial states (the rotation of a pair, 60 degrees
giving 0.5, only the offset in the score) as properties, and the properties they rest on."""
import math

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

from npformer import MultiHeadAttention, Rotary, causal_mask
from support.gradients import check_gradients, gradient_checks

seeds = st.integers(0, 2**32 - 1)
positions = st.integers(-300, 300)
bases = st.sampled_from([10000.0, 500000.0, 100.0, 2.5])


@st.composite
def rotaries(draw):
    """A Rotary of any layout, head width, base and rotated fraction (at least one pair)."""
    head_dim = draw(st.sampled_from([2, 4, 6, 8, 16]))
    fraction = draw(st.sampled_from([1.0, 0.5, 0.75, 0.25]))
    assume(int(head_dim * fraction) >= 2)
    return Rotary(head_dim, draw(bases), draw(st.sampled_from(Rotary.LAYOUTS)), fraction)


def rotate(rope, vec, p):
    """R_p vec for one vector [D] at one position p."""
    out, _ = rope.forward(vec.reshape(1, 1, 1, -1), np.array([p]))
    return out.ravel()


def reference_rotate(rope, vec, p):
    """The same rotation written with complex numbers: pair (a, b) -> (a + ib) e^{i p w}."""
    r = rope.rotated
    if rope.layout == "half":
        a_idx, b_idx = np.arange(r // 2), np.arange(r // 2) + r // 2
    else:
        a_idx, b_idx = np.arange(0, r, 2), np.arange(1, r, 2)
    w = rope.base ** (-np.arange(r // 2) * 2.0 / r)
    z = (vec[a_idx] + 1j * vec[b_idx]) * np.exp(1j * p * w)
    out = vec.copy()
    out[a_idx], out[b_idx] = z.real, z.imag
    return out


@given(rope=rotaries(), seed=seeds, p=positions)
def test_rotation_matches_a_complex_number_reference(rope, seed, p):
    vec = np.random.default_rng(seed).standard_normal(rope.head_dim)
    np.testing.assert_allclose(rotate(rope, vec, p), reference_rotate(rope, vec, p), atol=1e-12)


@given(rope=rotaries(), seed=seeds, i=positions, j=positions)
def test_score_depends_only_on_the_offset(rope, seed, i, j):
    # (R_i q) . (R_j k) = q . (R_{j-i} k)
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, rope.head_dim))
    assert rotate(rope, q, i) @ rotate(rope, k, j) == pytest.approx(q @ rotate(rope, k, j - i),
                                                                    abs=1e-10)


@given(rope=rotaries(), seed=seeds, p=positions)
def test_rotation_preserves_norms(rope, seed, p):
    vec = np.random.default_rng(seed).standard_normal(rope.head_dim)
    assert np.linalg.norm(rotate(rope, vec, p)) == pytest.approx(np.linalg.norm(vec), rel=1e-12)


@given(rope=rotaries(), seed=seeds)
def test_position_zero_is_the_identity(rope, seed):
    vec = np.random.default_rng(seed).standard_normal(rope.head_dim)
    np.testing.assert_array_equal(rotate(rope, vec, 0), vec)


@given(rope=rotaries(), seed=seeds, a=positions, b=positions)
def test_rotations_compose_by_adding_positions(rope, seed, a, b):
    # R_a R_b = R_{a+b}
    vec = np.random.default_rng(seed).standard_normal(rope.head_dim)
    np.testing.assert_allclose(rotate(rope, rotate(rope, vec, b), a), rotate(rope, vec, a + b),
                               atol=1e-11)


@given(rope=rotaries(), seed=seeds, p=positions)
def test_backward_is_the_inverse_rotation(rope, seed, p):
    x = np.random.default_rng(seed).standard_normal((2, 1, 3, rope.head_dim))
    pos = np.arange(p, p + 3)
    rotated, cache = rope.forward(x, pos)
    np.testing.assert_allclose(rope.backward(rotated, cache), x, atol=1e-12)


def test_two_dimensions_sixty_degrees():
    # With head width 2 there is one pair and its frequency is base^0 = 1, so position p
    # rotates by p radians: no integer position is 60 degrees away from another. Two
    # honest ways to get exactly 60 degrees:
    q = k = np.array([1.0, 0.0])
    two_d = Rotary(2)
    for p in (0, 1, 7, 123):                           # same position: score 1
        assert rotate(two_d, q, p) @ rotate(two_d, k, p) == pytest.approx(1.0, abs=1e-12)
    # (a) angles() is p * w_0 = p for any real p, so the real "position" pi/3 is 60 degrees
    assert two_d.angles(np.array([math.pi / 3]))[0, 0] == pytest.approx(math.pi / 3)
    assert q @ rotate(two_d, k, math.pi / 3) == pytest.approx(0.5, abs=1e-12)
    assert rotate(two_d, q, 2.0) @ rotate(two_d, k, 2.0 + math.pi / 3) == pytest.approx(0.5, abs=1e-12)
    # (b) integer positions: a head of width 4 with base = (3/pi)^2 has frequencies
    # w_0 = 1 and w_1 = base^(-1/2) = pi/3. q = k = [1, 0] in the plane of pair 1
    # (features 1 and 3 in the half layout) sees an offset of 1 as exactly 60 degrees.
    four_d = Rotary(4, base=(3 / math.pi) ** 2)
    np.testing.assert_allclose(four_d.angles(np.array([1])), [[1.0, math.pi / 3]], rtol=1e-15)
    q4 = k4 = np.array([0.0, 1.0, 0.0, 0.0])
    for i in (0, 5, 40):
        assert rotate(four_d, q4, i) @ rotate(four_d, k4, i) == pytest.approx(1.0, abs=1e-12)
        assert rotate(four_d, q4, i) @ rotate(four_d, k4, i + 1) == pytest.approx(0.5, abs=1e-12)
        assert rotate(four_d, q4, i) @ rotate(four_d, k4, i - 1) == pytest.approx(0.5, abs=1e-12)
        assert rotate(four_d, q4, i) @ rotate(four_d, k4, i + 3) == pytest.approx(-1.0, abs=1e-12)


def attention_with_rope(layout, seed, fraction=1.0, permute=False):
    """A 2-head attention layer with RoPE; with ``permute`` its Q and K projection
    columns are reordered so that the interleaved layout pairs what half pairs."""
    rng = np.random.default_rng(seed)
    d, H = 12, 2
    D = d // H
    attn = MultiHeadAttention(d, H, rope=Rotary(D, layout=layout, fraction=fraction),
                              rng=rng, dtype=np.float64)
    if permute:
        R = attn.rope.rotated
        # interleaved feature 2i holds half feature i, 2i+1 holds i + R/2; the rest stay
        source = np.concatenate([np.stack([np.arange(R // 2), np.arange(R // 2) + R // 2], 1).ravel(),
                                 np.arange(R, D)])
        w = attn.qkv.weight.data
        for head in range(2 * H):                       # H query heads, then H key heads
            cols = head * D + np.arange(D)
            w[:, cols] = w[:, head * D + source]
    return attn


@given(seed=seeds, fraction=st.sampled_from([1.0, 0.5, 2 / 3]))
def test_layouts_agree_after_permuting_projection_columns(seed, fraction):
    x = np.random.default_rng(seed + 1).standard_normal((2, 5, 12))
    pos = np.arange(3, 8)
    half, half_cache = attention_with_rope("half", seed, fraction).forward(x, causal_mask(5), pos)
    inter, inter_cache = attention_with_rope("interleaved", seed, fraction, permute=True).forward(
        x, causal_mask(5), pos)
    np.testing.assert_allclose(inter_cache.weights, half_cache.weights, atol=1e-12)
    np.testing.assert_allclose(inter, half, atol=1e-12)
    # without the permutation the layouts differ (unless one pair is rotated: then they coincide)
    plain = attention_with_rope("interleaved", seed, fraction)
    if plain.rope.rotated >= 4:
        assert not np.allclose(plain(x, causal_mask(5), pos), half)


@given(seed=seeds, shift=st.integers(-100, 1000), layout=st.sampled_from(Rotary.LAYOUTS))
def test_shifting_every_position_leaves_all_scores_unchanged(seed, shift, layout):
    attn = attention_with_rope(layout, seed)
    x = np.random.default_rng(seed + 1).standard_normal((2, 6, 12))
    _, base = attn.forward(x, causal_mask(6), np.arange(6))
    _, shifted = attn.forward(x, causal_mask(6), np.arange(6) + shift)
    # raw scores q . k of the rotated queries and keys, then the softmax weights
    scores = base.attn.q @ base.attn.k.swapaxes(-1, -2)
    shifted_scores = shifted.attn.q @ shifted.attn.k.swapaxes(-1, -2)
    np.testing.assert_allclose(shifted_scores, scores, atol=1e-10)
    np.testing.assert_allclose(shifted.weights, base.weights, atol=1e-12)
    # per-sequence shifts (positions [B, N]) too
    _, per_row = attn.forward(x, causal_mask(6), np.arange(6) + np.array([[shift], [7]]))
    np.testing.assert_allclose(per_row.weights, base.weights, atol=1e-12)


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="layout: expected one of"):
        Rotary(8, layout="pairs")
    with pytest.raises(ValueError, match="fraction: rotates 0 features"):
        Rotary(8, fraction=0.1)
    with pytest.raises(ValueError, match="x: expected head width 8"):
        Rotary(8).forward(np.zeros((1, 1, 2, 6)), np.arange(2))


def test_an_unknown_pair_layout_is_a_clear_error():
    from npformer.t05_rope import rotate
    x = np.ones((1, 1, 2, 4))
    with pytest.raises(ValueError, match=r"layout: expected one of \('half', 'interleaved'\), got 'pairs'"):
        rotate(x, np.ones((2, 2)), np.zeros((2, 2)), layout="pairs")


@pytest.mark.parametrize("layout", Rotary.LAYOUTS)
def test_the_attention_layer_rotates_both_its_queries_and_its_keys(layout):
    """What the layer compares are R_p q and R_p k, each turned at its own position (the
    complex-number reference above), not one side only."""
    attn = attention_with_rope(layout, 3)
    x = np.random.default_rng(4).standard_normal((1, 5, 12))
    where = np.array([0, 1, 4, 9, 30])
    _, cache = attn.forward(x, causal_mask(5), where)
    q, k, _ = attn.split_heads(attn.qkv(x))                       # before rotation: [1, H, N, D]
    for h in range(2):
        for n, p in enumerate(where):
            np.testing.assert_allclose(cache.attn.q[0, h, n], reference_rotate(attn.rope, q[0, h, n], p),
                                       atol=1e-12)
            np.testing.assert_allclose(cache.attn.k[0, h, n], reference_rotate(attn.rope, k[0, h, n], p),
                                       atol=1e-12)


@pytest.mark.parametrize("name, size, track", gradient_checks("t05_rope.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)
