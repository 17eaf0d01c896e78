"""Causal attention in tiles: the fast twin computes only the keys each tile of queries may
read (``npformer.fast.attention``), and equals the plain attention on every drawn input, with
tiles as small as one query, and at the lengths a model trains at."""
import numpy as np
import pytest
from hypothesis import given, settings

import npformer
import npformer.fast.attention as fast_attention
from npformer import track

from support.twin_check import assert_same, check_twins
from support.twin_pairs import CASES


@pytest.mark.parametrize("rows", [1, 2])
@pytest.mark.parametrize("pair", ["attention", "grouped_attention"])
def test_tiles_of_a_few_queries_equal_the_plain_attention(pair, rows, monkeypatch):
    monkeypatch.setattr(fast_attention, "TILE_ROWS", rows)
    settings(max_examples=150)(given(CASES[pair])(check_twins))()


@pytest.mark.parametrize("M", [150, 137])
@pytest.mark.parametrize("masked", [False, True])
def test_tiles_at_a_training_length(M, masked):
    # 150 queries in two tiles; with M = 137 keys the first 13 queries read nothing
    rng = np.random.default_rng(M)
    q = rng.standard_normal((2, 4, 150, 8))
    k, v = rng.standard_normal((2, 2, M, 8)), rng.standard_normal((2, 2, M, 5))
    mask = rng.random((2, 1, 1, M)) < 0.8 if masked else None
    d_out = rng.standard_normal((2, 4, 150, 5))
    with track("plain"):
        out, cache = npformer.grouped_attention_forward(q, k, v, mask, causal=True)
        grads = npformer.grouped_attention_backward(d_out, cache)
    with track("fast"):
        fast_out, fast_cache = npformer.grouped_attention_forward(q, k, v, mask, causal=True)
        assert len(fast_cache.tiles) == 2
        fast_grads = npformer.grouped_attention_backward(d_out, fast_cache)
    assert_same(out, fast_out, 0.1, "output")
    assert_same(cache.weights, fast_cache.weights, 0.1, "weights")
    for name, expected, got in zip("qkv", grads, fast_grads):
        assert_same(expected, got, 0.1, f"d_{name}")


@pytest.mark.parametrize("M", [5, 7, 8, 130])
def test_the_largest_score_may_sit_at_any_key(M):
    # scores of about 0 and one of 250 at the key being checked: a softmax shifted by anything
    # but the maximum overflows exp() in float32 (past 88), so the fast twin's maximum, taken by
    # folding halves of the keys onto each other, must reach every key, an odd last one too
    rng = np.random.default_rng(M)
    for key in (0, M // 2, M - 1):
        q = np.zeros((1, 2, 3, 4), np.float32)
        q[..., 0] = 10
        k = (0.1 * rng.standard_normal((1, 2, M, 4))).astype(np.float32)
        k[:, :, key, 0] = 50
        v = rng.standard_normal((1, 2, M, 3)).astype(np.float32)
        with track("plain"):
            out, cache = npformer.attention_forward(q, k, v)
        with track("fast"):
            fast_out, fast_cache = npformer.attention_forward(q, k, v)
        assert np.isfinite(fast_out).all()
        assert_same(cache.weights, fast_cache.weights, 0.1, f"weights, key {key} of {M}")
        assert_same(out, fast_out, 0.1, f"output, key {key} of {M}")
