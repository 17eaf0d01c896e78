"""Sliding-window attention: each position reads at most the W most recent positions."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from npformer import (DecoderConfig, DecoderLM, MultiHeadAttention, causal_mask, padding_mask,
                      sliding_window_mask)

seeds = st.integers(0, 2**32 - 1)


def window_by_loops(n, window, m):
    """The definition, one entry at a time: query i sits at m - n + i and reads key j iff
    j is at most W - 1 positions before it (itself included) and not after it."""
    allowed = np.zeros((n, m), bool)
    for i in range(n):
        here = m - n + i
        for j in range(m):
            allowed[i, j] = here - window < j <= here
    return allowed


@given(n=st.integers(1, 12), extra=st.integers(0, 6), window=st.integers(1, 15))
def test_mask_matches_the_definition(n, extra, window):
    m = n + extra                                     # extra: keys already in a KV cache
    mask = sliding_window_mask(n, window, m)
    np.testing.assert_array_equal(mask, window_by_loops(n, window, m))
    # each query reads at most W keys: exactly min(W, its position + 1)
    np.testing.assert_array_equal(mask.sum(-1), np.minimum(window, np.arange(m - n, m) + 1))


@given(n=st.integers(1, 12), extra=st.integers(0, 6), more=st.integers(0, 5))
def test_a_window_at_least_the_length_is_causal(n, extra, more):
    m = n + extra
    np.testing.assert_array_equal(sliding_window_mask(n, m + more, m), causal_mask(n, m))


def small_model(seed, window, positions="rope", n_kv_heads=None):
    config = DecoderConfig(vocab_size=13, d_model=8, n_heads=2, n_kv_heads=n_kv_heads,
                           n_layers=2, max_len=16, positions=positions, window=window)
    rng = np.random.default_rng(seed)
    model = DecoderLM(config, rng, np.float64)
    for p in model.parameters():
        p.data += 0.5 * rng.standard_normal(p.shape)
    return model


@given(seed=seeds, n=st.integers(1, 10), more=st.integers(0, 4),
       positions=st.sampled_from(["learned", "rope"]))
def test_model_with_a_window_at_least_the_length_equals_the_causal_model(seed, n, more, positions):
    windowed = small_model(seed, n + more, positions)
    causal = small_model(seed, None, positions)
    ids = np.random.default_rng(seed).integers(0, 13, (2, n))
    np.testing.assert_allclose(windowed(ids), causal(ids), rtol=1e-13, atol=1e-13)


@given(seed=seeds, n=st.integers(2, 10), window=st.integers(1, 4))
def test_a_narrower_window_changes_what_is_read(seed, n, window):
    # a control for the test above: once W < N the last position loses its earliest keys
    # (distinct tokens: with equal ones the values read could coincide)
    ids = np.random.default_rng(seed).permutation(13)[None, :n]
    if window < n:
        assert not np.allclose(small_model(seed, window)(ids)[:, -1], small_model(seed, None)(ids)[:, -1])


@given(seed=seeds, n=st.integers(1, 10), window=st.integers(1, 6), pads=st.tuples(
    st.integers(0, 9), st.integers(0, 9)), side=st.sampled_from(["left", "right"]))
def test_window_composes_with_padding(seed, n, window, pads, side):
    # every attention weight is > 0 exactly where the window AND the padding allow it
    model = small_model(seed, window)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 13, (2, n))
    lengths = np.array([n - min(p, n - 1) for p in pads])
    key_mask = padding_mask(lengths, n, side=side)[:, 0, 0]          # [B, N], True = real token
    _, cache = model.forward(ids, key_mask=key_mask)
    expected = window_by_loops(n, window, n)[None] & key_mask[:, None, :]   # [B, N, N]
    for layer in range(2):
        weights = cache.attention(layer)                               # [B, H, N, N]
        np.testing.assert_array_equal(weights > 0, np.broadcast_to(expected[:, None], weights.shape))
        assert ((weights > 0).sum(-1) <= window).all()                 # at most W keys per query
        readable = np.broadcast_to(expected.any(-1)[:, None], weights.shape[:3])  # rows with a key
        np.testing.assert_allclose(weights.sum(-1), np.where(readable, 1.0, 0.0), atol=1e-12)


@given(seed=seeds, window=st.integers(1, 5), prompt=st.integers(1, 10), n_kv_heads=st.sampled_from([1, 2]))
def test_decoding_reads_only_the_last_window_of_the_cache(seed, window, prompt, n_kv_heads):
    # Poison every cached entry older than the window of the next query: NaN values would
    # make any read of them visible (0 * NaN = NaN), so an unchanged output proves they
    # were not read. Poisoning the oldest entry inside the window must change it.
    model = small_model(seed, window, n_kv_heads=n_kv_heads)
    ids = np.random.default_rng(seed).integers(0, 13, (2, prompt + 1))
    clean = model.new_kv_cache(2)
    model.forward(ids[:, :prompt], kv_cache=clean)
    expected, _ = model.forward(ids[:, prompt:], kv_cache=clean)

    def step_after_poisoning(positions):
        cache = model.new_kv_cache(2)
        model.forward(ids[:, :prompt], kv_cache=cache)
        cache.k[:, :, :, positions] = np.nan
        cache.v[:, :, :, positions] = np.nan
        return model.forward(ids[:, prompt:], kv_cache=cache)[0]

    # the new query sits at position `prompt` and may read prompt - W + 1 .. prompt
    oldest_read = prompt - window + 1
    np.testing.assert_array_equal(step_after_poisoning(np.arange(0, max(oldest_read, 0))), expected)
    if max(oldest_read, 0) < prompt:                  # a cached entry inside the window exists
        assert np.isnan(step_after_poisoning(np.array([max(oldest_read, 0)]))).all()


def test_window_below_one_is_a_clear_error():
    with pytest.raises(ValueError, match=r"window: expected an integer >= 1 or None, got 0"):
        sliding_window_mask(4, 0)
    with pytest.raises(ValueError, match=r"window: expected an integer >= 1 or None, got -2"):
        MultiHeadAttention(8, 2, window=-2, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"window: expected an integer >= 1 or None, got 0"):
        DecoderConfig(window=0)
    with pytest.raises(ValueError, match=r"window: expected an integer >= 1 or None, got 1.5"):
        sliding_window_mask(4, 1.5)
