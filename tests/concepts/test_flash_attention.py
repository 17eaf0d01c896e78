"""Blockwise (flash) attention equals plain attention, in value and gradient, with linear memory."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from npformer import (BlockwiseAttention, DecoderConfig, MultiHeadAttention, attention_forward,
                      causal_mask, flash_attention_backward, flash_attention_forward,
                      grouped_attention_backward, grouped_attention_forward, padding_mask,
                      sliding_window_mask)
from npformer import gradcheck
from npformer.testing.cases import CASES
from support.gradients import check_gradients, gradient_checks


def reference(q, k, v, allowed):
    """softmax(q k^T / sqrt(D)) v written out per head with explicit loops (independent of both)."""
    B, H, N, D = q.shape
    G = H // k.shape[1]
    out = np.zeros(q.shape[:3] + (v.shape[-1],))
    for b in range(B):
        for h in range(H):
            s = q[b, h] @ k[b, h // G].T / np.sqrt(D)
            a = np.broadcast_to(allowed, (B, H) + s.shape)[b, h]
            for i in range(N):
                if a[i].any():
                    e = np.exp(s[i, a[i]] - s[i, a[i]].max())
                    out[b, h, i] = (e / e.sum()) @ v[b, h // G][a[i]]
    return out


shapes = st.tuples(st.integers(1, 2), st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 2), (4, 1)]),
                   st.integers(1, 9), st.integers(0, 4), st.integers(1, 5))


@given(shape=shapes, block=st.integers(1, 10), causal=st.booleans(),
       window=st.one_of(st.none(), st.integers(1, 6)), seed=st.integers(0, 10**6))
def test_equals_plain_attention_value_and_gradient(shape, block, causal, window, seed):
    B, (H, H_kv), N, extra_keys, D = shape
    M = N + extra_keys if (causal or window) else max(1, N + extra_keys - 2)
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((B, H, N, D)), rng.standard_normal((B, H_kv, M, D))
    v = rng.standard_normal((B, H_kv, M, D + 1))
    if window is not None:
        mask = sliding_window_mask(N, window, M)
    elif causal:
        mask = causal_mask(N, M)
    else:
        mask = None
    out, cache = grouped_attention_forward(q, k, v, mask)
    fout, fcache = flash_attention_forward(q, k, v, causal=causal, window=window, block_size=block)
    np.testing.assert_allclose(fout, out, rtol=1e-10, atol=1e-12)
    d_out = rng.standard_normal(out.shape)
    for plain, flash in zip(grouped_attention_backward(d_out, cache), flash_attention_backward(d_out, fcache)):
        np.testing.assert_allclose(flash, plain, rtol=1e-9, atol=1e-11)


def test_matches_explicit_loops_with_padding_and_fully_masked_rows(rng):
    B, H, H_kv, N, D = 2, 4, 2, 6, 3
    q, k, v = rng.standard_normal((B, H, N, D)), rng.standard_normal((B, H_kv, N, D)), \
        rng.standard_normal((B, H_kv, N, D))
    pad = padding_mask(np.array([0, 4]), N, side="left")       # sequence 0 is all padding
    out, cache = flash_attention_forward(q, k, v, mask=pad, causal=True, block_size=4)
    allowed = causal_mask(N)[None, None] & pad
    np.testing.assert_allclose(out, reference(q, k, v, allowed), atol=1e-12)
    assert np.all(out[0] == 0) and np.isfinite(out).all()      # no readable key: zero, not NaN
    grads = flash_attention_backward(rng.standard_normal(out.shape), cache)
    assert all(np.isfinite(g).all() for g in grads) and np.all(grads[0][0] == 0)


def test_weights_property_recomputes_the_softmax(rng):
    q, k, v = (rng.standard_normal((1, 2, 7, 4)) for _ in range(3))
    _, plain = attention_forward(q, k, v, causal_mask(7))
    _, flash = flash_attention_forward(q, k, v, causal=True, block_size=3)
    np.testing.assert_allclose(flash.weights, plain.weights, atol=1e-12)
    np.testing.assert_allclose(flash.weights.sum(-1), 1.0)


def test_cache_is_linear_in_length():
    """The cache holds q, k, v, out and one lse per row: no N x N table."""
    rng = np.random.default_rng(0)
    B, H, N, D = 1, 2, 512, 8
    q, k, v = (rng.standard_normal((B, H, N, D), dtype=np.float32) for _ in range(3))
    out, cache = flash_attention_forward(q, k, v, causal=True, block_size=64)
    assert out.dtype == np.float32 and cache.lse.shape == (B, H, N)
    assert cache.nbytes == 4 * q.nbytes + cache.lse.nbytes        # q, k, v, out, lse
    assert cache.nbytes < B * H * N * N * 4 / 10


def test_float32_stays_float32_and_is_close_to_float64(rng):
    q, k, v = (rng.standard_normal((2, 4, 33, 8)) for _ in range(3))
    out64, _ = flash_attention_forward(q, k, v, causal=True, block_size=8)
    q32, k32, v32 = (a.astype(np.float32) for a in (q, k, v))
    out32, cache = flash_attention_forward(q32, k32, v32, causal=True, block_size=8)
    grads = flash_attention_backward(out32, cache)
    assert out32.dtype == np.float32 and all(g.dtype == np.float32 for g in grads)
    np.testing.assert_allclose(out32, out64, atol=1e-5)


def test_gradient_check_case_is_registered_and_passes():
    for size in range(3):
        target, inputs, options = CASES["flash_attention"](np.random.default_rng(size), size)
        report = gradcheck(target, *inputs, **options)
        assert report.ok, str(report)


@pytest.mark.parametrize("causal_inside", [False, True])
def test_multi_head_attention_with_the_blockwise_kernel_equals_plain(rng, causal_inside):
    # the causal rule either as a mask from outside or applied by the kernel itself
    d, H, H_kv, N = 12, 4, 2, 5
    mask = None if causal_inside else causal_mask(N)
    plain = MultiHeadAttention(d, H, H_kv, rng=np.random.default_rng(0), dtype=np.float64,
                               causal=causal_inside)
    flash = MultiHeadAttention(d, H, H_kv, rng=np.random.default_rng(0), dtype=np.float64,
                               causal=causal_inside, kernel=BlockwiseAttention(block_size=2))
    x = rng.standard_normal((2, N, d))
    y1, c1 = plain.forward(x, mask)
    y2, c2 = flash.forward(x, mask)
    np.testing.assert_allclose(y2, y1, atol=1e-12)
    np.testing.assert_allclose(c2.weights, c1.weights, atol=1e-12)
    np.testing.assert_array_equal(c1.weights[0, 0] > 0, np.tril(np.ones((N, N), bool)))
    d_y = rng.standard_normal(y1.shape)
    np.testing.assert_allclose(flash.backward(d_y, c2), plain.backward(d_y, c1), atol=1e-12)
    for (name, p1), (_, p2) in zip(plain.named_parameters(), flash.named_parameters()):
        np.testing.assert_allclose(p2.grad, p1.grad, atol=1e-12, err_msg=name)


def test_unknown_attention_kernel_is_a_clear_error():
    with pytest.raises(ValueError, match=r"attention: expected one of \('plain', 'flash', 'alibi'\), got 'fast'"):
        DecoderConfig(attention="fast")


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(block_size=0), ValueError, "block_size"),
    (dict(window=0), ValueError, "window"),
    (dict(mask=np.ones((3, 3), int)), TypeError, "mask"),
    (dict(mask=np.ones((5, 5), bool)), ValueError, "mask"),
])
def test_errors_name_the_argument(rng, kwargs, error, words):
    q = rng.standard_normal((1, 2, 4, 3))
    with pytest.raises(error, match=words):
        flash_attention_forward(q, q, q, **kwargs)
    with pytest.raises(ValueError, match="heads"):
        flash_attention_forward(rng.standard_normal((1, 3, 4, 2)), q[:, :, :, :2], q[:, :, :, :2])


@pytest.mark.parametrize("name, size, track", gradient_checks("t18_flash_attention.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)
