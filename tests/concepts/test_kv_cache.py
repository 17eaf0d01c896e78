"""KV cache: decoding piece by piece gives the logits of one full forward, at every step."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from npformer import DecoderConfig, DecoderLM, MultiHeadAttention

TOL = dict(rtol=1e-10, atol=1e-10)


@st.composite
def models(draw, positions=("learned", "sinusoidal", "rope")):
    """A random small float64 decoder: any position scheme, GQA/MQA, window or not."""
    H = draw(st.sampled_from([1, 2, 4]))
    config = DecoderConfig(
        vocab_size=13, d_model=H * draw(st.sampled_from([2, 4])), n_heads=H,
        n_kv_heads=draw(st.sampled_from([h for h in (1, 2, 4) if H % h == 0])),
        n_layers=draw(st.integers(1, 2)), max_len=12,
        positions=draw(st.sampled_from(positions)),
        rope_layout=draw(st.sampled_from(["half", "interleaved"])),
        norm=draw(st.sampled_from(["layernorm", "rmsnorm"])),
        ffn=draw(st.sampled_from(["gelu", "swiglu"])),
        prenorm=draw(st.booleans()), window=draw(st.none() | st.integers(1, 5)),
        tie_embeddings=draw(st.booleans()))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    model = DecoderLM(config, rng, np.float64)
    for p in model.parameters():                 # larger than the init, so attention is not flat
        p.data += 0.5 * rng.standard_normal(p.shape)
    return model, rng


def decode(model, ids, splits, key_mask=None, positions=None):
    """Run ``ids`` through a KV cache in the pieces [0:s1], [s1:s2], ...; concatenated logits."""
    B, N = ids.shape
    cache = model.new_kv_cache(B, capacity=N)
    k_buffer = cache.k
    pieces = []
    for start, stop in zip([0, *splits], [*splits, N]):
        options = {}
        if key_mask is not None:
            options["key_mask"] = key_mask[:, start:stop]
        if positions is not None:
            options["positions"] = positions[..., start:stop]
        logits, _ = model.forward(ids[:, start:stop], kv_cache=cache, **options)
        pieces.append(logits)
        assert cache.k is k_buffer                 # preallocated: never regrown
        assert cache.length == stop
    return np.concatenate(pieces, axis=1)


@given(setup=models(), B=st.integers(1, 2), n=st.integers(1, 10), prompt=st.integers(1, 10))
def test_token_by_token_decode_equals_the_full_forward(setup, B, n, prompt):
    model, rng = setup
    prompt = min(prompt, n)
    ids = rng.integers(0, 13, (B, n))
    full, _ = model.forward(ids)
    steps = decode(model, ids, list(range(prompt, n)))       # the prompt, then one token a step
    np.testing.assert_allclose(steps, full, **TOL)


@given(setup=models(), n=st.integers(2, 10), cuts=st.sets(st.integers(1, 9), max_size=4))
def test_any_split_into_chunks_equals_the_full_forward(setup, n, cuts):
    model, rng = setup
    ids = rng.integers(0, 13, (2, n))
    full, _ = model.forward(ids)
    np.testing.assert_allclose(decode(model, ids, sorted(c for c in cuts if c < n)), full, **TOL)


@given(setup=models(), n=st.integers(2, 10), prompt=st.integers(1, 9), pad=st.integers(0, 4))
def test_left_padded_batch_with_per_row_positions(setup, n, prompt, pad):
    # row 1 is left-padded by `pad`; its positions start at its first real token
    model, rng = setup
    prompt, pad = min(prompt, n), min(pad, n - 1)
    ids = rng.integers(0, 13, (2, n))
    key_mask = np.ones((2, n), bool)
    key_mask[1, :pad] = False
    positions = np.stack([np.arange(n), np.maximum(np.arange(n) - pad, 0)])
    full, _ = model.forward(ids, key_mask=key_mask, positions=positions)
    steps = decode(model, ids, list(range(prompt, n)), key_mask, positions)
    np.testing.assert_allclose(steps, full, **TOL)


def test_the_cache_reads_stored_keys_not_recomputed_ones():
    # a check that the comparisons above can fail: corrupt a stored key and the next step changes
    model = DecoderLM(DecoderConfig(positions="rope", vocab_size=13, max_len=8), np.random.default_rng(0),
                      np.float64)
    ids = np.random.default_rng(1).integers(0, 13, (1, 6))
    full, _ = model.forward(ids)
    cache = model.new_kv_cache(1)
    model.forward(ids[:, :5], kv_cache=cache)
    cache.v[:, :, :, 2] += 1.0
    step, _ = model.forward(ids[:, 5:], kv_cache=cache)
    assert not np.allclose(step, full[:, 5:], **TOL)


def test_kv_cache_size_and_layout():
    config = DecoderConfig(d_model=16, n_heads=4, n_kv_heads=2, n_layers=3, max_len=10)
    cache = DecoderLM(config).new_kv_cache(batch=2)
    assert cache.k.shape == cache.v.shape == (3, 2, 2, 10, 4)   # [layers, B, H_kv, capacity, D]
    assert cache.k.dtype == np.float32
    assert cache.nbytes == 2 * 3 * 2 * 2 * 10 * 4 * 4


# -- bad input -------------------------------------------------------------------------------
def test_a_step_past_the_capacity_is_a_clear_error():
    model = DecoderLM(DecoderConfig(vocab_size=13, max_len=8))
    cache = model.new_kv_cache(1, capacity=4)
    model.forward(np.zeros((1, 3), int), kv_cache=cache)
    with pytest.raises(ValueError, match=r"kv_cache: a step of 2 positions after 3 cached ones "
                                         r"exceeds the capacity 4"):
        model.forward(np.zeros((1, 2), int), kv_cache=cache)
    assert cache.length == 3                        # the failed step wrote nothing
    model.forward(np.zeros((1, 1), int), kv_cache=cache)
    with pytest.raises(ValueError, match="capacity 4"):
        model.forward(np.zeros((1, 1), int), kv_cache=cache)


def test_a_layer_kv_past_its_capacity_is_a_clear_error():
    attn = MultiHeadAttention(8, 2, rng=np.random.default_rng(0))
    cache = DecoderLM(DecoderConfig()).new_kv_cache(1, capacity=3)
    attn.forward(np.zeros((1, 3, 8), np.float32), kv=cache.layers[0])
    cache.advance(3)
    with pytest.raises(ValueError, match="kv_cache: .*capacity 3"):
        attn.forward(np.zeros((1, 1, 8), np.float32), kv=cache.layers[0])


@pytest.mark.parametrize("other", [
    dict(n_kv_heads=1),                          # other K/V head count
    dict(n_layers=2),                            # other depth
    dict(d_model=16),                            # same K/V heads, other head width
])
def test_a_cache_from_a_different_model_is_a_clear_error(other):
    model = DecoderLM(DecoderConfig(d_model=8, n_heads=2, vocab_size=13))
    foreign = DecoderLM(DecoderConfig(**{**dict(d_model=8, n_heads=2, vocab_size=13), **other}))
    with pytest.raises(ValueError, match=r"kv_cache: .*does not fit this model.*different model"):
        model.forward(np.zeros((1, 2), int), kv_cache=foreign.new_kv_cache(1))


def test_a_cache_of_another_batch_or_dtype_is_a_clear_error():
    model = DecoderLM(DecoderConfig(vocab_size=13))
    with pytest.raises(ValueError, match=r"kv_cache: .*batch 1"):
        model.forward(np.zeros((1, 2), int), kv_cache=model.new_kv_cache(2))
    with pytest.raises(ValueError, match=r"kv_cache: .*float64"):
        model.forward(np.zeros((1, 2), int), kv_cache=model.astype(np.float64).new_kv_cache(1))


def test_backward_through_a_kv_cached_step_is_refused_and_says_why():
    # the cache holds keys without their history: no gradient can go back through it
    model = DecoderLM(DecoderConfig(vocab_size=7, d_model=8, n_heads=2, n_layers=1, max_len=8),
                      np.random.default_rng(0), np.float64)
    ids = np.array([[1, 2, 3]])
    logits, cache = model.forward(ids, kv_cache=model.new_kv_cache(1))
    with pytest.raises(NotImplementedError, match="backward through a KV-cached decode step is not "
                                                   "supported: the KV cache is for inference"):
        model.backward(np.ones_like(logits), cache)
