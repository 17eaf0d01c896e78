"""The encoder-decoder backbone and its cross-attention."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from npformer.t04_attention import MultiHeadAttention
from npformer.testing.gradcheck import assert_gradcheck
from npformer.t16_cross_attention import CrossAttention
from npformer.t17_seq2seq import EncoderDecoder, Seq2SeqConfig
from support.gradients import check_gradients, gradient_checks

V, D_MODEL, HEADS = 13, 8, 2


def tiny(**overrides):
    config = Seq2SeqConfig(**{**dict(vocab_size=V, d_model=D_MODEL, n_heads=HEADS, n_encoder_layers=2,
                                     n_decoder_layers=2, max_len=10), **overrides})
    return EncoderDecoder(config, np.random.default_rng(3), np.float64)


def tiny_bart(**overrides):
    return tiny(**{**Seq2SeqConfig.bart().to_dict(), "vocab_size": V, "d_model": D_MODEL,
                   "n_heads": HEADS, "n_encoder_layers": 2, "n_decoder_layers": 2, "max_len": 10,
                   **overrides})


def randomise(model, seed=0):
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.data += 0.3 * rng.standard_normal(p.shape)
    return model


# -- cross-attention ----------------------------------------------------------------------
def test_cross_attention_matches_an_independent_computation(rng):
    layer = randomise(CrossAttention(8, 2, d_memory=6, bias=True, rng=rng).astype(np.float64))
    x, memory = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 5, 6))
    source_real = np.array([[True] * 5, [True] * 2 + [False] * 3])
    out = layer(x, memory, source_real[:, None, None, :])
    params = layer.state_dict()
    q = x @ params["q.weight"] + params["q.bias"]
    kv = memory @ params["kv.weight"] + params["kv.bias"]
    k, v = kv[..., :8], kv[..., 8:]                                     # columns [K | V]
    heads = []
    for h in range(2):
        cols = slice(4 * h, 4 * h + 4)
        scores = np.einsum("bnd,bmd->bnm", q[..., cols], k[..., cols]) / math.sqrt(4)
        scores[~np.broadcast_to(source_real[:, None, :], scores.shape)] = -np.inf
        w = np.exp(scores - scores.max(-1, keepdims=True))
        heads.append(np.einsum("bnm,bmd->bnd", w / w.sum(-1, keepdims=True), v[..., cols]))
    expected = np.concatenate(heads, -1) @ params["out.weight"] + params["out.bias"]
    np.testing.assert_allclose(out, expected, atol=1e-12)


def test_cross_attention_reading_its_own_input_is_self_attention(rng):
    # With memory = x and [Wq | Wkv] = Wqkv, cross-attention is unmasked self-attention.
    cross = randomise(CrossAttention(8, 2, bias=True, rng=rng).astype(np.float64))
    mha = MultiHeadAttention(8, 2, bias=True, rng=rng).astype(np.float64)
    p = cross.state_dict()
    mha.load_state_dict({"qkv.weight": np.concatenate([p["q.weight"], p["kv.weight"]], axis=1),
                         "qkv.bias": np.concatenate([p["q.bias"], p["kv.bias"]]),
                         "out.weight": p["out.weight"], "out.bias": p["out.bias"]})
    x = rng.standard_normal((2, 4, 8))
    np.testing.assert_allclose(cross(x, x), mha(x), atol=1e-12)


def test_cross_attention_gradient_check_with_grouped_heads(rng):
    layer = CrossAttention(8, 4, n_kv_heads=2, d_memory=5, bias=True, rng=rng)
    mask = np.array([[True] * 6, [True] * 4 + [False] * 2])[:, None, None, :]
    assert_gradcheck(layer, rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 6, 5)),
                     tol=1e-6, mask=mask)


# -- gradients of the whole model ---------------------------------------------------------------
@pytest.mark.parametrize("overrides", [
    dict(prenorm=True),                                          # Pre-Norm, shared and tied
    dict(prenorm=False, share_embeddings=False, tie_head=False, src_vocab_size=7),
])
def test_full_model_gradient_check_every_parameter(overrides, rng):
    model = tiny(**overrides)
    src = rng.integers(0, model.encoder.config.vocab_size, (2, 5))
    tgt = rng.integers(0, V, (2, 4))
    src_mask = np.array([[True] * 5, [True] * 3 + [False] * 2])
    tgt_mask = np.array([[True] * 4, [True] * 2 + [False] * 2])
    report = assert_gradcheck(model, src, tgt, tol=1e-6, src_mask=src_mask, tgt_mask=tgt_mask)
    assert len(report.checks) == len(model.parameters())


@pytest.mark.parametrize("prenorm", [True, False])
def test_memory_gradient_sums_over_every_decoder_layer(prenorm, rng):
    # d(logits)/d(memory) by finite differences: it is only right if the backward adds
    # what each of the three layers' cross-attentions sends back.
    model = randomise(tiny(n_decoder_layers=3, prenorm=prenorm))
    tgt = rng.integers(0, V, (2, 4))
    src_mask = np.array([[True] * 5, [True] * 4 + [False]])
    pair = (lambda memory: model.decode_forward(memory, tgt, src_mask),
            lambda d_logits, cache: model.decode_backward(d_logits, cache))
    assert_gradcheck(pair, rng.standard_normal((2, 5, D_MODEL)), tol=1e-6)

    # and every layer's share is non-zero: dropping one layer's d_memory changes the sum
    memory = rng.standard_normal((2, 5, D_MODEL))
    logits, cache = model.decode_forward(memory, tgt, src_mask)
    d_logits = rng.standard_normal(logits.shape)
    total = model.decode_backward(d_logits, cache)
    d_x = model.head.backward(d_logits, cache.head)
    if model.final_norm is not None:
        d_x = model.final_norm.backward(d_x, cache.final_norm)
    shares = []
    for block, bc in zip(reversed(model.blocks), reversed(cache.blocks)):
        d_x, share = block.backward(d_x, bc)
        shares.append(share)
    np.testing.assert_allclose(sum(shares), total, atol=1e-12)
    assert all(np.abs(share).max() > 1e-6 for share in shares)


def test_shared_embeddings_are_one_parameter_in_three_places():
    model = tiny_bart()
    assert model.tokens.weight is model.encoder.tokens.weight is model.head.weight
    names = [name for name, _ in model.named_parameters()]
    assert "encoder.tokens.weight" in names and "tokens.weight" not in names
    assert "head.weight" not in names and names[-1] == "logits_bias"
    untied = tiny(share_embeddings=False, tie_head=False)
    assert untied.tokens.weight is not untied.encoder.tokens.weight
    assert {"tokens.weight", "head.weight"} <= {name for name, _ in untied.named_parameters()}


# -- what the decoder reads ------------------------------------------------------------------
@given(seed=st.integers(0, 2**31 - 1), cut=st.integers(1, 5), prenorm=st.booleans())
def test_decoder_is_causal(seed, cut, prenorm):
    rng = np.random.default_rng(seed)
    model = randomise(tiny(prenorm=prenorm), seed)
    src, tgt = rng.integers(0, V, (2, 4)), rng.integers(0, V, (2, 6))
    changed = tgt.copy()
    changed[:, cut:] = rng.integers(0, V, (2, 6 - cut))                  # rewrite the future
    a, b = model(src, tgt), model(src, changed)
    np.testing.assert_allclose(a[:, :cut], b[:, :cut], atol=1e-12)


def test_decoder_output_depends_on_the_source(rng):
    model = randomise(tiny())
    src, tgt = rng.integers(0, V, (1, 5)), rng.integers(0, V, (1, 4))
    other = src.copy()
    other[0, -1] = (src[0, -1] + 1) % V                                   # one source token
    a, b = model(src, tgt), model(other, tgt)
    assert np.abs(a - b).max(axis=-1).min() > 1e-6                        # every target position moves


def test_encoder_reads_the_whole_source_bidirectionally(rng):
    model = randomise(tiny())
    src = rng.integers(0, V, (1, 5))
    other = src.copy()
    other[0, -1] = (src[0, -1] + 1) % V
    assert np.abs(model.encode(src)[0, 0] - model.encode(other)[0, 0]).max() > 1e-6


@given(seed=st.integers(0, 2**31 - 1), src_lengths=st.lists(st.integers(1, 6), min_size=2, max_size=2),
       tgt_lengths=st.lists(st.integers(1, 5), min_size=2, max_size=2))
def test_padding_does_not_change_real_positions(seed, src_lengths, tgt_lengths):
    rng = np.random.default_rng(seed)
    model = randomise(tiny_bart(), seed)
    src_mask = np.arange(6)[None, :] < np.array(src_lengths)[:, None]    # right padding
    tgt_mask = np.arange(5)[None, :] >= 5 - np.array(tgt_lengths)[:, None]  # left padding
    src, tgt = rng.integers(0, V, (2, 6)), rng.integers(0, V, (2, 5))
    other_src = np.where(src_mask, src, rng.integers(0, V, (2, 6)))
    other_tgt = np.where(tgt_mask, tgt, rng.integers(0, V, (2, 5)))
    a = model(src, tgt, src_mask=src_mask, tgt_mask=tgt_mask)
    b = model(other_src, other_tgt, src_mask=src_mask, tgt_mask=tgt_mask)
    np.testing.assert_allclose(a[tgt_mask], b[tgt_mask], atol=1e-12)


def test_logits_bias_is_added_to_every_position(rng):
    model = randomise(tiny_bart())
    src, tgt = rng.integers(0, V, (2, 4)), rng.integers(0, V, (2, 3))
    before = model(src, tgt)
    shift = rng.standard_normal(V)
    model.logits_bias.data += shift
    np.testing.assert_allclose(model(src, tgt) - before, np.broadcast_to(shift, before.shape), atol=1e-12)


def test_float32_stays_float32(rng):
    model = EncoderDecoder(Seq2SeqConfig.bart(), np.random.default_rng(0))
    logits, cache = model.forward(rng.integers(0, 50, (2, 5)), rng.integers(0, 50, (2, 3)))
    assert logits.dtype == np.float32
    model.backward(np.ones_like(logits), cache)
    assert all(p.grad.dtype == np.float32 for p in model.parameters())


# -- bad input ----------------------------------------------------------------------------------
def test_bad_inputs_raise_clear_errors(rng):
    model = tiny(src_vocab_size=7, share_embeddings=False)
    src, tgt = rng.integers(0, 7, (2, 5)), rng.integers(0, V, (2, 4))
    with pytest.raises(ValueError, match=r"src_ids: expected ids in \[0, 7\)"):
        model(np.full((2, 5), 7), tgt)
    with pytest.raises(ValueError, match=r"tgt_ids: expected ids in \[0, 13\)"):
        model(src, np.full((2, 4), V))
    with pytest.raises(ValueError, match=r"src_mask: expected a boolean array of shape \(2, 5\)"):
        model(src, tgt, src_mask=np.ones((2, 4), bool))
    with pytest.raises(ValueError, match=r"tgt_mask: expected a boolean array of shape \(2, 4\)"):
        model(src, tgt, tgt_mask=np.ones((2, 5), bool))
    with pytest.raises(ValueError, match="tgt_ids: expected batch size 2"):
        model(src, tgt[:1])
    with pytest.raises(ValueError, match="tgt_ids: sequence length 11 exceeds max_len 10"):
        model(src, rng.integers(0, V, (2, 11)))
    with pytest.raises(TypeError, match="memory: expected dtype float64"):
        model.decode_forward(np.zeros((2, 5, D_MODEL), np.float32), tgt)
    with pytest.raises(ValueError, match=r"memory: expected shape \(2, M, 8\)"):
        model.decode_forward(np.zeros((2, 5, 4)), tgt)


def test_bad_configs_raise_clear_errors(rng):
    with pytest.raises(ValueError, match="n_heads: d_model=10 must be divisible by n_heads, got n_heads=4"):
        Seq2SeqConfig(d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="src_vocab_size: share_embeddings needs one vocabulary"):
        Seq2SeqConfig(vocab_size=10, src_vocab_size=7)
    with pytest.raises(ValueError, match="n_decoder_layers: expected a positive integer, got 0"):
        Seq2SeqConfig(n_decoder_layers=0)
    with pytest.raises(ValueError, match="n_heads: width d=10 must be divisible"):
        CrossAttention(10, 4, rng=rng)
    with pytest.raises(ValueError, match="n_kv_heads: n_heads=4 must be divisible by n_kv_heads"):
        CrossAttention(8, 4, n_kv_heads=3, rng=rng)
    layer = CrossAttention(8, 2, rng=rng)
    with pytest.raises(ValueError, match="mask: expected a shape that broadcasts"):
        layer(np.zeros((2, 3, 8), np.float32), np.zeros((2, 5, 8), np.float32),
              np.ones((2, 1, 1, 4), bool))
    assert Seq2SeqConfig.from_dict(Seq2SeqConfig.bart().to_dict()) == Seq2SeqConfig.bart()


# -- cross-check against Hugging Face BART (run with -m crosscheck) ----------------------------------
@pytest.mark.crosscheck
def test_bart_configuration_matches_hugging_face_bart(rng):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.BartConfig(vocab_size=V, d_model=D_MODEL, encoder_layers=2, decoder_layers=2,
                                     encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
                                     encoder_ffn_dim=4 * D_MODEL, decoder_ffn_dim=4 * D_MODEL,
                                     max_position_embeddings=10, activation_function="gelu",
                                     scale_embedding=False)
    torch.manual_seed(0)
    hf = transformers.BartForConditionalGeneration(config).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.3)
        hf.final_logits_bias.normal_(0, 0.3)
    sd = {k: v.double().numpy() for k, v in hf.state_dict().items()}
    state = {"encoder.tokens.weight": sd["model.shared.weight"],
             "logits_bias": sd["final_logits_bias"][0]}

    def linear(ours, theirs):
        state[ours + ".weight"], state[ours + ".bias"] = sd[theirs + ".weight"].T, sd[theirs + ".bias"]

    def norm(ours, theirs):
        state[ours + ".gamma"], state[ours + ".beta"] = sd[theirs + ".weight"], sd[theirs + ".bias"]

    for ours, theirs in (("encoder.", "model.encoder."), ("", "model.decoder.")):
        state[ours + "positions.weight"] = sd[theirs + "embed_positions.weight"][2:]  # BART's offset 2
        norm(ours + "embed_norm", theirs + "layernorm_embedding")
        for i in range(2):
            b, p = f"{ours}blocks.{i}.", f"{theirs}layers.{i}."
            qkv = [f"{p}self_attn.{n}_proj" for n in "qkv"]
            state[b + "attn.qkv.weight"] = np.concatenate([sd[n + ".weight"].T for n in qkv], axis=1)
            state[b + "attn.qkv.bias"] = np.concatenate([sd[n + ".bias"] for n in qkv])
            linear(b + "attn.out", p + "self_attn.out_proj")
            norm(b + "norm1", p + "self_attn_layer_norm")
            linear(b + "ffn.up", p + "fc1")
            linear(b + "ffn.down", p + "fc2")
            norm(b + "norm2", p + "final_layer_norm")
            if not ours:
                kv = [f"{p}encoder_attn.{n}_proj" for n in "kv"]
                state[b + "cross_attn.kv.weight"] = np.concatenate([sd[n + ".weight"].T for n in kv], 1)
                state[b + "cross_attn.kv.bias"] = np.concatenate([sd[n + ".bias"] for n in kv])
                linear(b + "cross_attn.q", p + "encoder_attn.q_proj")
                linear(b + "cross_attn.out", p + "encoder_attn.out_proj")
                norm(b + "cross_norm", p + "encoder_attn_layer_norm")
    model = tiny_bart().load_state_dict(state).astype(np.float32)
    src, tgt = rng.integers(0, V, (2, 6)), rng.integers(0, V, (2, 5))
    src_mask = np.array([[True] * 6, [True] * 4 + [False] * 2])
    ours = model(src, tgt, src_mask=src_mask)
    with torch.no_grad():
        theirs = hf(input_ids=torch.tensor(src), attention_mask=torch.tensor(src_mask.astype(int)),
                    decoder_input_ids=torch.tensor(tgt)).logits.numpy()
    np.testing.assert_allclose(ours, theirs, atol=1e-4)


@pytest.mark.parametrize("name, size, track", gradient_checks("t17_seq2seq.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)
