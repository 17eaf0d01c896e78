"""A decoder with attention="flash" computes what the plain one does, with memory linear in N."""
import numpy as np
from hypothesis import given, settings, strategies as st

from npformer.t10_model import DecoderConfig, DecoderLM

recipes = st.sampled_from([DecoderConfig.gpt2, DecoderConfig.llama])


def twins(recipe, seed, **overrides):
    """The same weights built twice: plain attention and blockwise attention, float64."""
    plain = DecoderLM(recipe(**overrides), np.random.default_rng(seed)).astype(np.float64)
    flash = DecoderLM(recipe(attention="flash", **overrides), np.random.default_rng(seed))
    return plain, flash.astype(np.float64)


@given(recipes, st.sampled_from([None, 1, 3]), st.integers(1, 9), st.integers(0, 4),
       st.integers(0, 10 ** 6))
@settings(max_examples=25)
def test_flash_model_equals_plain_model_in_logits_and_every_gradient(recipe, window, N, pad, seed):
    plain, flash = twins(recipe, seed, d_model=16, n_heads=4, n_layers=2, window=window)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 50, (2, N))
    key_mask = np.ones((2, N), bool)
    key_mask[0, :min(pad, N - 1)] = False                     # left padding in row 0
    positions = np.clip(np.cumsum(key_mask, axis=1) - 1, 0, None)
    a, cache_a = plain.forward(ids, key_mask=key_mask, positions=positions)
    b, cache_b = flash.forward(ids, key_mask=key_mask, positions=positions)
    np.testing.assert_allclose(b, a, atol=1e-12)
    upstream = rng.standard_normal(a.shape)
    plain.backward(upstream, cache_a)
    flash.backward(upstream, cache_b)
    for (name, p), (_, q) in zip(plain.named_parameters(), flash.named_parameters()):
        np.testing.assert_allclose(q.grad, p.grad, atol=1e-10, err_msg=name)


@given(recipes, st.integers(1, 7), st.integers(0, 10 ** 6))
@settings(max_examples=15)
def test_flash_model_kv_cache_decoding_equals_full_forward(recipe, split, seed):
    _, flash = twins(recipe, seed, d_model=16, n_heads=4, n_kv_heads=2, n_layers=2, window=4)
    ids = np.random.default_rng(seed).integers(0, 50, (1, 8))
    full = flash(ids)
    cache = flash.new_kv_cache(1)
    steps = [flash(ids[:, :split], kv_cache=cache)]
    steps += [flash(ids[:, t:t + 1], kv_cache=cache) for t in range(split, 8)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-10)


def test_flash_cache_holds_no_score_table():
    plain, flash = twins(DecoderConfig.gpt2, 0, d_model=16, n_heads=4, max_len=512)
    ids = np.zeros((1, 512), np.int64)
    _, cache_a = plain.forward(ids)
    _, cache_b = flash.forward(ids)
    table = 4 * 512 * 512 * 8                                 # [B, H, N, N] float64 weights
    assert cache_a.nbytes - cache_b.nbytes >= table * 0.9
