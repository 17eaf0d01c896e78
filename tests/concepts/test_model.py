"""The tutorial's tiny decoder, causality and padding through the whole model."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from npformer.t10_model import DecoderConfig, DecoderLM
from support.gradients import check_gradients, gradient_checks

IDS = np.array([[3, 8, 12, 5, 17, 42, 23, 6]])


def test_tiny_decoder_defaults_are_the_tutorials():
    c = DecoderConfig()
    assert (c.vocab_size, c.d_model, c.n_heads, c.max_len, c.positions, c.ffn, c.norm, c.prenorm) == \
        (50, 8, 2, 16, "learned", "gelu", "layernorm", True)
    model = DecoderLM(c)
    assert model.blocks[0].ffn.up.weight.shape == (8, 32)   # FFN width 4x


def test_tiny_decoder_shapes_and_the_rows_it_may_read():
    logits, cache = DecoderLM().forward(IDS)
    weights = cache.attention(0)
    assert logits.shape == (1, 8, 50) and weights.shape == (1, 2, 8, 8)
    for h in range(2):
        assert weights[0, h, 0, 0] == 1.0 and (weights[0, h, 0, 1:] == 0).all()   # first row
        assert (weights[0, h, -1] > 0).all()                                      # last row: all 8
        np.testing.assert_allclose(weights[0, h].sum(-1), 1, rtol=1e-6)


def test_four_heads_halve_the_head_width_and_keep_the_logits_shape():
    model = DecoderLM(DecoderConfig(n_heads=4))
    logits, cache = model.forward(IDS)
    assert model.blocks[0].attn.head_dim == 2
    assert logits.shape == (1, 8, 50) and cache.attention(0).shape == (1, 4, 8, 8)


def test_without_the_causal_mask_the_first_row_reads_later_positions():
    _, cache = DecoderLM(DecoderConfig(causal=False)).forward(IDS)
    assert (cache.attention(0)[0, :, 0, 1:] > 0).all()


configs = st.sampled_from([
    DecoderConfig(n_layers=2),
    DecoderConfig.gpt2(n_layers=2, d_model=16, n_heads=4),
    DecoderConfig.llama(n_layers=2, d_model=16, n_heads=4, n_kv_heads=2),
    DecoderConfig(positions="sinusoidal", prenorm=False, ffn="relu"),
])


@given(configs, st.integers(1, 7), st.integers(0, 10 ** 6))
def test_changing_future_tokens_leaves_earlier_outputs_unchanged(config, t, seed):
    rng = np.random.default_rng(seed)
    model = DecoderLM(config, rng).astype(np.float64)
    ids = rng.integers(0, config.vocab_size, (2, 8))
    changed = ids.copy()
    changed[:, t:] = rng.integers(0, config.vocab_size, (2, 8 - t))
    np.testing.assert_allclose(model(changed)[:, :t], model(ids)[:, :t], atol=1e-12)


@given(configs, st.integers(1, 7), st.sampled_from(["left", "right"]), st.integers(0, 10 ** 6))
def test_changing_padded_tokens_leaves_real_positions_unchanged(config, length, side, seed):
    rng = np.random.default_rng(seed)
    model = DecoderLM(config, rng).astype(np.float64)
    N = 8
    real = np.zeros((1, N), bool)
    if side == "right":
        real[0, :length] = True
    else:
        real[0, N - length:] = True
    positions = np.clip(np.cumsum(real, axis=1) - 1, 0, None)   # real tokens count from 0
    ids = rng.integers(0, config.vocab_size, (1, N))
    changed = np.where(real, ids, rng.integers(0, config.vocab_size, (1, N)))
    a = model(ids, key_mask=real, positions=positions)
    b = model(changed, key_mask=real, positions=positions)
    np.testing.assert_allclose(a[real], b[real], atol=1e-12)


def test_float32_model_gives_float32_logits_and_gradients():
    model = DecoderLM(DecoderConfig.llama(d_model=16, n_heads=4, n_kv_heads=2))
    logits, cache = model.forward(IDS)
    assert logits.dtype == np.float32
    model.backward(np.ones_like(logits), cache)
    assert all(p.grad.dtype == np.float32 and p.data.dtype == np.float32 for p in model.parameters())
    assert all(np.isfinite(p.grad).all() for p in model.parameters())


def test_tied_head_shares_the_embedding_and_gets_both_gradients():
    model = DecoderLM(DecoderConfig.gpt2()).astype(np.float64)
    assert model.head.weight is model.tokens.weight
    names = [n for n, _ in model.named_parameters()]
    assert "head.weight" not in names and "tokens.weight" in names
    logits, cache = model.forward(IDS)
    model.zero_grad()
    model.backward(np.ones_like(logits), cache)
    total = model.tokens.weight.grad.copy()
    model.zero_grad()
    model.head.backward(np.ones_like(logits), cache.head)
    head_only = model.tokens.weight.grad.copy()
    assert np.abs(head_only).sum() > 0 and np.abs(total - head_only)[IDS[0]].sum() > 0


@pytest.mark.parametrize("bad, error, message", [
    (dict(d_model=8, n_heads=3), ValueError, "n_heads: d_model=8 must be divisible"),
    (dict(positions="sinusoid"), ValueError, "positions: expected one of"),
    (dict(n_kv_heads=3, n_heads=4), ValueError, "n_kv_heads"),
    (dict(window=0), ValueError, "window"),
])
def test_bad_configs(bad, error, message):
    with pytest.raises(error, match=message):
        DecoderConfig(**bad)


def test_a_model_too_big_for_the_memory_is_refused_before_a_layer_is_built():
    """A billion layers used to be built one by one for hours; the count comes first."""
    import time
    began = time.perf_counter()
    with pytest.raises(ValueError, match=r"^config: vocab_size=50, d_model=8, n_layers=1000000000 describe a "
                                         r"model of [\d,]+ parameters needing about [\d.,]+ TiB of memory "
                                         r"to build \(its weights and their gradients\), but [\d.,]+ \w+ are free$"):
        DecoderLM(DecoderConfig(n_layers=10 ** 9))
    assert time.perf_counter() - began < 5


def test_bad_ids():
    model = DecoderLM()
    with pytest.raises(ValueError, match=r"ids: expected ids in \[0, 50\) \(vocabulary size 50\), got 50"):
        model.forward(np.array([[1, 50]]))
    with pytest.raises(ValueError, match="got -1"):
        model.forward(np.array([[-1, 2]]))
    with pytest.raises(TypeError, match="ids: expected integer ids, got dtype float64"):
        model.forward(np.array([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="ids: sequence reaches position 16 but the position table has max_len 16"):
        model.forward(np.zeros((1, 17), int))
    with pytest.raises(ValueError, match=r"key_mask: expected a boolean array of shape \(1, 8\)"):
        model.forward(IDS, key_mask=np.ones((1, 7), bool))


def test_input_dtype_differing_from_parameters_is_a_type_error():
    from npformer.t02_linear import Linear
    layer = Linear(4, 2, rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="x: expected dtype float32 .* got float64"):
        layer.forward(np.zeros((1, 4)))


@pytest.mark.parametrize("name, size, track", gradient_checks("t10_model.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)
