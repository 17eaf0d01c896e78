"""The encoder-only backbone (BERT-style), mean pooling and L2 normalisation."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from npformer import Module
from npformer.t15_encoder import (Encoder, EncoderConfig, Pooler, l2_normalize_backward,
                                  l2_normalize_forward, mean_pool_backward, mean_pool_forward)
from npformer.testing.gradcheck import assert_gradcheck
from support.gradients import check_gradients, gradient_checks

V, D_MODEL, HEADS = 17, 8, 2


def tiny(**overrides):
    config = EncoderConfig.bert(vocab_size=V, d_model=D_MODEL, n_heads=HEADS, n_layers=2, max_len=12,
                                **overrides)
    return Encoder(config, np.random.default_rng(7), np.float64)


def randomise(model, seed=0):
    """Non-trivial parameters (gamma != 1, biases != 0), so no check passes by accident."""
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.data += 0.3 * rng.standard_normal(p.shape)
    return model


# -- an independent BERT forward, written out differently (loops over heads, math.erf) --
def _layer_norm(x, gamma, beta, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def _erf_gelu(x):
    return x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def reference_bert(params, config, ids, key_mask, segments):
    d, H = config.d_model, config.n_heads
    Dh = d // H
    N = ids.shape[1]
    x = params["tokens.weight"][ids] + params["segments.weight"][segments] + \
        params["positions.weight"][:N][None]
    x = _layer_norm(x, params["embed_norm.gamma"], params["embed_norm.beta"], config.norm_eps)
    for i in range(config.n_layers):
        p = lambda name: params[f"blocks.{i}.{name}"]  # noqa: E731
        qkv = x @ p("attn.qkv.weight") + p("attn.qkv.bias")
        heads = []
        for h in range(H):
            q = qkv[..., h * Dh:(h + 1) * Dh]
            k = qkv[..., d + h * Dh:d + (h + 1) * Dh]
            v = qkv[..., 2 * d + h * Dh:2 * d + (h + 1) * Dh]
            scores = np.einsum("bnd,bmd->bnm", q, k) / math.sqrt(Dh)
            scores = np.where(key_mask[:, None, :], scores, -1e30)
            w = np.exp(scores - scores.max(-1, keepdims=True))
            w = w / w.sum(-1, keepdims=True)
            heads.append(np.einsum("bnm,bmd->bnd", w, v))
        attended = np.concatenate(heads, -1) @ p("attn.out.weight") + p("attn.out.bias")
        h1 = _layer_norm(x + attended, p("norm1.gamma"), p("norm1.beta"), config.norm_eps)
        fed = _erf_gelu(h1 @ p("ffn.up.weight") + p("ffn.up.bias")) @ p("ffn.down.weight") + \
            p("ffn.down.bias")
        x = _layer_norm(h1 + fed, p("norm2.gamma"), p("norm2.beta"), config.norm_eps)
    return x


def test_encoder_matches_an_independent_bert_forward(rng):
    model = randomise(tiny())
    ids = rng.integers(0, V, (3, 7))
    segments = rng.integers(0, 2, (3, 7))
    key_mask = np.ones((3, 7), bool)
    key_mask[0, 5:] = False
    key_mask[2, 2:] = False
    states = model(ids, key_mask=key_mask, segments=segments)
    expected = reference_bert(model.state_dict(), model.config, ids, key_mask, segments)
    np.testing.assert_allclose(states, expected, atol=1e-10)


def test_default_segments_are_segment_zero(rng):
    model = randomise(tiny())
    ids = rng.integers(0, V, (2, 5))
    np.testing.assert_array_equal(model(ids), model(ids, segments=np.zeros((2, 5), int)))


def test_parameter_names_are_the_documented_ones():
    names = [name for name, _ in tiny().named_parameters()]
    assert names[:8] == ["tokens.weight", "positions.weight", "segments.weight",
                         "embed_norm.gamma", "embed_norm.beta", "blocks.0.norm1.gamma",
                         "blocks.0.norm1.beta", "blocks.0.attn.qkv.weight"]
    assert {"blocks.1.norm1.gamma", "blocks.1.ffn.up.bias", "blocks.1.norm2.beta"} <= set(names)
    assert not any(name.startswith("final_norm") for name in names)     # Post-Norm: none
    prenorm_names = [n for n, _ in tiny(prenorm=True).named_parameters()]
    assert prenorm_names[-2:] == ["final_norm.gamma", "final_norm.beta"]


# -- gradients ----------------------------------------------------------------------------
@pytest.mark.parametrize("overrides", [
    dict(),                                                               # BERT, Post-Norm
    dict(prenorm=True, positions="sinusoidal", ffn="gelu_tanh", type_vocab_size=3),
    dict(positions="none", type_vocab_size=0, embed_norm=False, ffn="relu", attn_bias=False),
])
def test_full_encoder_gradient_check_every_parameter(overrides, rng):
    model = tiny(**overrides)
    ids = rng.integers(0, V, (2, 5))
    key_mask = np.array([[True] * 5, [True] * 3 + [False] * 2])
    options = {"key_mask": key_mask}
    if model.config.type_vocab_size:
        options["segments"] = rng.integers(0, model.config.type_vocab_size, (2, 5))
    report = assert_gradcheck(model, ids, tol=1e-6, **options)
    assert len(report.checks) == len(model.parameters())


class _SentenceEmbedder(Module):
    """encoder -> mean over real tokens -> unit length, the sentence-transformers pipeline."""

    def __init__(self, encoder):
        self.encoder = encoder

    def forward(self, ids, key_mask):
        states, enc = self.encoder.forward(ids, key_mask)
        pooled, pool = mean_pool_forward(states, key_mask)
        unit, norm = l2_normalize_forward(pooled)
        return unit, (enc, pool, norm)

    def backward(self, d_unit, cache):
        enc, pool, norm = cache
        return self.encoder.backward(mean_pool_backward(l2_normalize_backward(d_unit, norm), pool), enc)


def test_sentence_embedding_pipeline_gradient_check(rng):
    model = _SentenceEmbedder(tiny())
    key_mask = np.array([[True] * 4 + [False] * 2, [True] * 6])
    assert_gradcheck(model, rng.integers(0, V, (2, 6)), tol=1e-6, key_mask=key_mask)


# -- what the encoder reads ---------------------------------------------------------------
@given(seed=st.integers(0, 2**31 - 1), lengths=st.lists(st.integers(1, 8), min_size=1, max_size=3),
       prenorm=st.booleans())
def test_padded_tokens_do_not_change_real_positions(seed, lengths, prenorm):
    rng = np.random.default_rng(seed)
    model = randomise(tiny(prenorm=prenorm), seed)
    B, N = len(lengths), 8
    key_mask = np.arange(N)[None, :] < np.array(lengths)[:, None]
    ids = rng.integers(0, V, (B, N))
    other = np.where(key_mask, ids, rng.integers(0, V, (B, N)))           # new tokens at padding
    segments = rng.integers(0, 2, (B, N))
    other_segments = np.where(key_mask, segments, 1 - segments)
    a = model(ids, key_mask=key_mask, segments=segments)
    b = model(other, key_mask=key_mask, segments=other_segments)
    np.testing.assert_allclose(a[key_mask], b[key_mask], rtol=0, atol=1e-12)


def test_encoder_is_bidirectional(rng):
    model = randomise(tiny())
    ids = rng.integers(0, V, (1, 6))
    later = ids.copy()
    later[0, -1] = (ids[0, -1] + 1) % V                                   # change the last token
    a, b = model(ids), model(later)
    assert np.abs(a[0, 0] - b[0, 0]).max() > 1e-6                          # position 0 sees it


@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 8))
def test_without_positions_the_encoder_is_permutation_equivariant(seed, n):
    rng = np.random.default_rng(seed)
    model = randomise(tiny(positions="none"), seed)
    ids = rng.integers(0, V, (2, n))
    segments = rng.integers(0, 2, (2, n))
    key_mask = rng.random((2, n)) < 0.8
    key_mask[:, 0] = True
    order = rng.permutation(n)
    states = model(ids, key_mask=key_mask, segments=segments)
    permuted = model(ids[:, order], key_mask=key_mask[:, order], segments=segments[:, order])
    np.testing.assert_allclose(permuted, states[:, order], atol=1e-12)


# -- pooling and normalisation --------------------------------------------------------------
def test_mean_pool_equals_a_hand_computed_mean(rng):
    states = rng.standard_normal((3, 5, 4))
    key_mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 1, 0, 1, 0]], bool)
    pooled, _ = mean_pool_forward(states, key_mask)
    np.testing.assert_allclose(pooled[0], (states[0, 0] + states[0, 1] + states[0, 2]) / 3)
    np.testing.assert_allclose(pooled[1], states[1].mean(axis=0))
    np.testing.assert_allclose(pooled[2], (states[2, 1] + states[2, 3]) / 2)
    np.testing.assert_allclose(mean_pool_forward(states)[0], states.mean(axis=1))


@given(seed=st.integers(0, 2**31 - 1))
def test_mean_pool_ignores_padding(seed):
    rng = np.random.default_rng(seed)
    states = rng.standard_normal((2, 6, 3))
    key_mask = rng.random((2, 6)) < 0.5
    key_mask[:, 0] = True
    noisy = np.where(key_mask[..., None], states, 1e6 * rng.standard_normal(states.shape))
    np.testing.assert_allclose(mean_pool_forward(noisy, key_mask)[0],
                               mean_pool_forward(states, key_mask)[0], atol=1e-12)


def test_mean_pool_of_a_row_without_real_tokens_is_zero_with_zero_gradient(rng):
    states = rng.standard_normal((2, 3, 4))
    key_mask = np.array([[False] * 3, [True] * 3])
    pooled, cache = mean_pool_forward(states, key_mask)
    assert np.all(pooled[0] == 0) and np.all(np.isfinite(pooled))
    assert np.all(mean_pool_backward(rng.standard_normal((2, 4)), cache)[0] == 0)


@given(seed=st.integers(0, 2**31 - 1), scale=st.floats(1e-3, 1e3))
def test_l2_normalize_gives_unit_vectors_along_x(seed, scale):
    rng = np.random.default_rng(seed)
    x = scale * rng.standard_normal((3, 5))
    y, cache = l2_normalize_forward(x)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(y * np.linalg.norm(x, axis=-1, keepdims=True), x, rtol=1e-10)
    # scaling x does not move y, so the gradient has no component along y
    dx = l2_normalize_backward(rng.standard_normal((3, 5)), cache)
    np.testing.assert_allclose(np.sum(dx * y, axis=-1), 0, atol=1e-10 / scale)


def test_l2_normalize_of_zero_is_zero_not_nan():
    y, cache = l2_normalize_forward(np.zeros((1, 4)))
    assert np.all(y == 0)
    assert np.all(np.isfinite(l2_normalize_backward(np.ones((1, 4)), cache)))


def test_sentence_vector_is_the_normalised_mean_of_real_states(rng):
    model = randomise(tiny())
    ids = rng.integers(0, V, (2, 5))
    key_mask = np.array([[True] * 2 + [False] * 3, [True] * 5])
    states = model(ids, key_mask=key_mask)
    vector = model.sentence_vector(ids, key_mask)
    first = states[0, :2].mean(axis=0)
    np.testing.assert_allclose(vector[0], first / np.linalg.norm(first))
    np.testing.assert_allclose(np.linalg.norm(vector, axis=-1), 1.0)


def test_float32_stays_float32(rng):
    model = Encoder(EncoderConfig(), np.random.default_rng(0))
    states, cache = model.forward(rng.integers(0, 50, (2, 4)))
    assert states.dtype == np.float32
    model.backward(np.ones_like(states), cache)
    assert all(p.grad.dtype == np.float32 for p in model.parameters())


# -- bad input ----------------------------------------------------------------------------------
def test_bad_inputs_raise_clear_errors(rng):
    model = tiny()
    ids = rng.integers(0, V, (2, 5))
    with pytest.raises(ValueError, match=r"ids: expected ids in \[0, 17\)"):
        model(np.full((2, 5), V))
    with pytest.raises(ValueError, match="ids: expected a \\[B, N\\] array"):
        model(ids[0])
    with pytest.raises(TypeError, match="ids: expected integer ids"):
        model(ids.astype(float))
    with pytest.raises(ValueError, match=r"key_mask: expected a boolean array of shape \(2, 5\)"):
        model(ids, key_mask=np.ones((2, 4), bool))
    with pytest.raises(ValueError, match="key_mask: expected a boolean"):
        model(ids, key_mask=np.ones((2, 5), int))
    with pytest.raises(ValueError, match=r"segments: expected ids in \[0, 2\)"):
        model(ids, segments=np.full((2, 5), 2))
    with pytest.raises(ValueError, match=r"segments: expected shape \(2, 5\)"):
        model(ids, segments=np.zeros((2, 4), int))
    with pytest.raises(ValueError, match="ids: sequence length 13 exceeds max_len 12"):
        model(rng.integers(0, V, (1, 13)))
    with pytest.raises(ValueError, match="segments: this encoder has no segment embedding"):
        tiny(type_vocab_size=0)(ids, segments=np.zeros((2, 5), int))


def test_bad_configs_raise_clear_errors():
    with pytest.raises(ValueError, match="n_heads: d_model=10 must be divisible by n_heads, got n_heads=4"):
        EncoderConfig(d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="type_vocab_size: expected an integer >= 0"):
        EncoderConfig(type_vocab_size=-1)
    with pytest.raises(ValueError, match="positions: expected one of"):
        EncoderConfig(positions="relative")
    with pytest.raises(ValueError, match="config: unknown fields \\['colour'\\]"):
        EncoderConfig.from_dict({"colour": 1})
    assert EncoderConfig.from_dict(EncoderConfig(n_layers=3).to_dict()) == EncoderConfig(n_layers=3)


def test_mean_pool_rejects_bad_shapes(rng):
    with pytest.raises(ValueError, match=r"key_mask: expected a boolean array of shape \(2, 3\)"):
        mean_pool_forward(rng.standard_normal((2, 3, 4)), np.ones((2, 4), bool))
    with pytest.raises(TypeError, match="states: expected a float array"):
        mean_pool_forward(rng.standard_normal((2, 3)))


# -- BERT's pooler and its frozen [PAD] row -----------------------------------------------------
def test_pooler_output_is_tanh_of_the_first_state_through_a_linear(rng):
    model = randomise(tiny(pooler=True))
    ids, segments = rng.integers(0, V, (3, 7)), rng.integers(0, 2, (3, 7))
    key_mask = np.arange(7)[None] < np.array([[7], [5], [2]])
    params = model.state_dict()
    first = reference_bert(params, model.config, ids, key_mask, segments)[:, 0]
    expected = np.tanh(first @ params["pooler.weight"] + params["pooler.bias"])
    np.testing.assert_allclose(model.pool(ids, key_mask, segments), expected, atol=1e-12)
    assert [n for n, _ in model.named_parameters()][-2:] == ["pooler.weight", "pooler.bias"]


def test_pooler_sends_gradient_to_the_first_position_only(rng):
    pooler = Pooler(D_MODEL, rng, dtype=np.float64)
    pooled, cache = pooler.forward(rng.standard_normal((2, 5, D_MODEL)))
    d_states = pooler.backward(rng.standard_normal(pooled.shape), cache)
    assert d_states.shape == (2, 5, D_MODEL) and not d_states[:, 1:].any() and d_states[:, 0].all()


def test_pad_token_id_freezes_that_row_of_the_word_embeddings_only(rng):
    model = randomise(tiny(pad_token_id=0))
    ids = rng.integers(1, V, (2, 5))
    ids[0, 2] = ids[1, 4] = 0                        # [PAD] read at positions with gradient
    states, cache = model.forward(ids)
    model.backward(rng.standard_normal(states.shape), cache)
    assert not model.tokens.weight.grad[0].any() and model.tokens.weight.grad[ids[0, 0]].any()
    assert model.segments.padding_idx is None and model.segments.weight.grad[0].any()


def test_pooler_and_pad_token_id_errors_and_old_configs(rng):
    with pytest.raises(ValueError, match="pool: this encoder has no pooler"):
        tiny().pool(rng.integers(0, V, (1, 3)))
    with pytest.raises(ValueError, match=r"pad_token_id: expected None or an integer in \[0, 50\)"):
        EncoderConfig(pad_token_id=50)
    with pytest.raises(ValueError, match=r"states: expected an array \[B, N, d\]"):
        Pooler(D_MODEL, rng).forward(np.zeros((2, D_MODEL), np.float32))
    old = EncoderConfig.bert().to_dict()             # written before the two fields existed
    del old["pad_token_id"], old["pooler"]
    assert EncoderConfig.from_dict(old) == EncoderConfig.bert(pad_token_id=None, pooler=False)


# -- cross-check against Hugging Face BertModel (run with -m crosscheck) --------------------------
@pytest.mark.crosscheck
def test_matches_hugging_face_bert_with_random_weights(rng):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=V, hidden_size=D_MODEL, num_hidden_layers=2,
                                     num_attention_heads=HEADS, intermediate_size=4 * D_MODEL,
                                     max_position_embeddings=12, type_vocab_size=2, hidden_act="gelu")
    torch.manual_seed(0)
    hf = transformers.BertModel(config, add_pooling_layer=False).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.3)
    sd = {k: v.double().numpy() for k, v in hf.state_dict().items()}
    state = {"tokens.weight": sd["embeddings.word_embeddings.weight"],
             "positions.weight": sd["embeddings.position_embeddings.weight"],
             "segments.weight": sd["embeddings.token_type_embeddings.weight"],
             "embed_norm.gamma": sd["embeddings.LayerNorm.weight"],
             "embed_norm.beta": sd["embeddings.LayerNorm.bias"]}
    for i in range(2):
        p, b = f"encoder.layer.{i}.", f"blocks.{i}."
        qkv = [f"{p}attention.self.{n}" for n in ("query", "key", "value")]
        state[b + "attn.qkv.weight"] = np.concatenate([sd[n + ".weight"].T for n in qkv], axis=1)
        state[b + "attn.qkv.bias"] = np.concatenate([sd[n + ".bias"] for n in qkv])
        for ours, theirs in (("attn.out", "attention.output.dense"), ("ffn.up", "intermediate.dense"),
                             ("ffn.down", "output.dense")):
            state[b + ours + ".weight"] = sd[p + theirs + ".weight"].T
            state[b + ours + ".bias"] = sd[p + theirs + ".bias"]
        for ours, theirs in (("norm1", "attention.output.LayerNorm"), ("norm2", "output.LayerNorm")):
            state[b + ours + ".gamma"] = sd[p + theirs + ".weight"]
            state[b + ours + ".beta"] = sd[p + theirs + ".bias"]
    model = tiny().load_state_dict(state).astype(np.float32)
    ids, segments = rng.integers(0, V, (3, 7)), rng.integers(0, 2, (3, 7))
    key_mask = np.ones((3, 7), bool)
    key_mask[0, 5:] = key_mask[2, 3:] = False
    ours = model(ids, key_mask=key_mask, segments=segments)
    with torch.no_grad():
        theirs = hf(input_ids=torch.tensor(ids), attention_mask=torch.tensor(key_mask.astype(int)),
                    token_type_ids=torch.tensor(segments)).last_hidden_state.numpy()
    np.testing.assert_allclose(ours[key_mask], theirs[key_mask], atol=1e-4)


@pytest.mark.parametrize("name, size, track", gradient_checks("t15_encoder.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)
