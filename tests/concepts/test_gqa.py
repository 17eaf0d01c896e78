"""Grouped-query attention: H query heads over H_kv shared key/value heads."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from npformer import (DecoderConfig, DecoderLM, KVCache, MultiHeadAttention, Rotary,
                      attention_backward, attention_forward, causal_mask,
                      grouped_attention_backward, grouped_attention_forward)

seeds = st.integers(0, 2**32 - 1)


@st.composite
def head_counts(draw):
    """(H, H_kv) with H_kv dividing H: MHA, GQA and MQA."""
    H = draw(st.sampled_from([1, 2, 4, 6, 8]))
    H_kv = draw(st.sampled_from([h for h in range(1, H + 1) if H % h == 0]))
    return H, H_kv


def reference_attention(q, k, v, mask):
    """Plain numpy, one query head at a time: head h reads key/value head h // (H / H_kv)."""
    B, H, N, D = q.shape
    group = H // k.shape[1]
    out = np.zeros_like(q)
    for h in range(H):
        scores = q[:, h] @ k[:, h // group].swapaxes(-1, -2) / np.sqrt(D)     # [B, N, M]
        scores = np.where(mask, scores, -np.inf)
        e = np.exp(scores - scores.max(-1, keepdims=True))
        out[:, h] = (e / e.sum(-1, keepdims=True)) @ v[:, h // group]
    return out


def reference_mha(attn, x, mask):
    """Multi-head attention written out from attn's weights, without attention_forward."""
    B, N, d = x.shape
    H, H_kv, D = attn.n_heads, attn.n_kv_heads, attn.head_dim
    w = attn.qkv.weight.data
    q = (x @ w[:, :H * D]).reshape(B, N, H, D).transpose(0, 2, 1, 3)
    k = (x @ w[:, H * D:(H + H_kv) * D]).reshape(B, N, H_kv, D).transpose(0, 2, 1, 3)
    v = (x @ w[:, (H + H_kv) * D:]).reshape(B, N, H_kv, D).transpose(0, 2, 1, 3)
    mixed = reference_attention(q, k, v, mask)
    return mixed.transpose(0, 2, 1, 3).reshape(B, N, d) @ attn.out.weight.data


@given(seed=seeds, heads=head_counts(), n=st.integers(1, 6))
def test_grouped_attention_matches_a_per_head_reference(seed, heads, n):
    H, H_kv = heads
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, H, n, 3))
    k, v = rng.standard_normal((2, 2, H_kv, n, 3))
    out, _ = grouped_attention_forward(q, k, v, causal_mask(n))
    np.testing.assert_allclose(out, reference_attention(q, k, v, causal_mask(n)), atol=1e-12)


@given(seed=seeds, H=st.sampled_from([1, 2, 4]), n=st.integers(1, 6))
def test_with_as_many_kv_heads_as_query_heads_it_is_multi_head_attention(seed, H, n):
    rng = np.random.default_rng(seed)
    attn = MultiHeadAttention(4 * H, H, n_kv_heads=H, rng=rng, dtype=np.float64)
    x = rng.standard_normal((2, n, 4 * H))
    np.testing.assert_allclose(attn(x, causal_mask(n)), reference_mha(attn, x, causal_mask(n)),
                               atol=1e-12)


@given(seed=seeds, heads=head_counts(), n=st.integers(1, 6))
def test_repeating_kv_heads_by_hand_gives_the_same_output_and_gradients(seed, heads, n):
    H, H_kv = heads
    G = H // H_kv
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, H, n, 3))
    k, v = rng.standard_normal((2, 2, H_kv, n, 3))
    g = rng.standard_normal((2, H, n, 3))
    mask = causal_mask(n)
    out, cache = grouped_attention_forward(q, k, v, mask)
    k_rep, v_rep = np.repeat(k, G, axis=1), np.repeat(v, G, axis=1)      # head h gets kv h // G
    out_rep, cache_rep = attention_forward(q, k_rep, v_rep, mask)
    np.testing.assert_allclose(out, out_rep, atol=1e-12)
    dq, dk, dv = grouped_attention_backward(g, cache)
    dq_rep, dk_rep, dv_rep = attention_backward(g, cache_rep)
    np.testing.assert_allclose(dq, dq_rep, atol=1e-12)
    # a shared head's gradient is the sum over the G query heads that read it
    np.testing.assert_allclose(dk, dk_rep.reshape(2, H_kv, G, n, 3).sum(2), atol=1e-12)
    np.testing.assert_allclose(dv, dv_rep.reshape(2, H_kv, G, n, 3).sum(2), atol=1e-12)


@given(seed=seeds, heads=head_counts(), n=st.integers(1, 5), rope=st.booleans())
def test_gqa_layer_equals_mha_layer_with_repeated_kv_projections(seed, heads, n, rope):
    H, H_kv = heads
    G, D = H // H_kv, 2
    d = H * D
    rng = np.random.default_rng(seed)
    gqa = MultiHeadAttention(d, H, H_kv, bias=True, rope=Rotary(D) if rope else None, rng=rng,
                             dtype=np.float64)
    mha = MultiHeadAttention(d, H, H, bias=True, rope=Rotary(D) if rope else None, rng=rng,
                             dtype=np.float64)
    for p in gqa.parameters():
        p.data += rng.standard_normal(p.shape)

    def repeat_kv(a):
        """[..., (H + 2 H_kv) D] -> [..., 3 H D]: each K/V head's columns copied G times."""
        qs, ks, vs = np.split(a, [H * D, (H + H_kv) * D], axis=-1)
        rep = lambda t: np.repeat(t.reshape(*t.shape[:-1], H_kv, D), G, axis=-2).reshape(
            *t.shape[:-1], H * D)
        return np.concatenate([qs, rep(ks), rep(vs)], axis=-1)

    mha.qkv.weight.data[...] = repeat_kv(gqa.qkv.weight.data)
    mha.qkv.bias.data[...] = repeat_kv(gqa.qkv.bias.data)
    mha.out.weight.data[...] = gqa.out.weight.data
    mha.out.bias.data[...] = gqa.out.bias.data

    x = rng.standard_normal((2, n, d))
    g = rng.standard_normal((2, n, d))
    y, cache = gqa.forward(x, causal_mask(n))
    y_rep, cache_rep = mha.forward(x, causal_mask(n))
    np.testing.assert_allclose(y, y_rep, atol=1e-12)
    np.testing.assert_allclose(gqa.backward(g, cache), mha.backward(g, cache_rep), atol=1e-11)
    np.testing.assert_allclose(gqa.out.weight.grad, mha.out.weight.grad, atol=1e-11)

    def sum_groups(a):
        """Inverse of repeat_kv for gradients: add the G copies of each K/V head."""
        qs, ks, vs = np.split(a, [H * D, 2 * H * D], axis=-1)
        fold = lambda t: t.reshape(*t.shape[:-1], H_kv, G, D).sum(-2).reshape(*t.shape[:-1], H_kv * D)
        return np.concatenate([qs, fold(ks), fold(vs)], axis=-1)

    np.testing.assert_allclose(gqa.qkv.weight.grad, sum_groups(mha.qkv.weight.grad), atol=1e-11)
    np.testing.assert_allclose(gqa.qkv.bias.grad, sum_groups(mha.qkv.bias.grad), atol=1e-11)


def test_kv_cache_of_32_over_8_heads_is_a_quarter_of_32_over_32():
    gqa = KVCache(n_layers=2, batch=3, n_kv_heads=8, capacity=64, head_dim=4)
    mha = KVCache(n_layers=2, batch=3, n_kv_heads=32, capacity=64, head_dim=4)
    assert gqa.nbytes * 4 == mha.nbytes
    # the figure written out: K and V, layers, batch, heads, positions, width, float32 bytes
    assert gqa.nbytes == 2 * 2 * 3 * 8 * 64 * 4 * 4
    # and the same through the models' own caches
    big = dict(d_model=64, n_heads=32, vocab_size=11, n_layers=2, max_len=16)
    grouped = DecoderLM(DecoderConfig(n_kv_heads=8, **big)).new_kv_cache(1)
    full = DecoderLM(DecoderConfig(n_kv_heads=32, **big)).new_kv_cache(1)
    assert full.nbytes / grouped.nbytes == 4.0


def test_heads_not_divisible_by_kv_heads_is_a_clear_error():
    with pytest.raises(ValueError,
                       match=r"n_kv_heads: n_heads=4 must be divisible by n_kv_heads, got n_kv_heads=3"):
        MultiHeadAttention(8, 4, 3, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"n_kv_heads: .*got n_kv_heads=3"):
        DecoderConfig(d_model=8, n_heads=4, n_kv_heads=3)
    with pytest.raises(ValueError, match="n_kv_heads"):
        MultiHeadAttention(8, 4, 0, rng=np.random.default_rng(0))
    q, k = np.zeros((1, 4, 2, 2)), np.zeros((1, 3, 2, 2))
    with pytest.raises(ValueError, match="k: query heads 4 must be a multiple of key/value heads 3"):
        grouped_attention_forward(q, k, k)
    with pytest.raises(ValueError, match="k: expected 4 heads like q, got 3; .* grouped_attention_forward"):
        attention_forward(q, k, k)
