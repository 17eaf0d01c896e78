"""Embedding(padding_idx=...): a token row the lookup reads but backward never updates
(PyTorch's nn.Embedding padding_idx, which BERT and BART use for [PAD]).

The frozen row is not the true derivative (a finite difference on it is not zero):
the facts tested are that its gradient stays exactly zero while the lookup still
reads it, and that every other row still gets its full, finite-difference gradient.
(PyTorch's own nn.Embedding is compared in tests/crosscheck.)
"""
import numpy as np
import pytest

from npformer import EncoderDecoder, Seq2SeqConfig
from npformer.t01_embedding import Embedding

V, D = 7, 4


def lookup_loss(table, ids, upstream):
    """sum(E[ids] * upstream), written as a loop over positions."""
    return sum(float(table[i] @ g) for i, g in zip(ids.ravel(), upstream.reshape(-1, D)))


def finite_difference(table, ids, upstream, eps=1e-6):
    numeric = np.zeros_like(table)
    for index in np.ndindex(table.shape):
        plus, minus = table.copy(), table.copy()
        plus[index] += eps
        minus[index] -= eps
        numeric[index] = (lookup_loss(plus, ids, upstream) - lookup_loss(minus, ids, upstream)) / (2 * eps)
    return numeric


def test_padding_row_is_read_but_gets_no_gradient(rng):
    emb = Embedding(V, D, rng, dtype=np.float64, padding_idx=2)
    emb.weight.data[...] = rng.standard_normal((V, D))           # the [PAD] row non-zero too
    ids = np.array([[2, 0, 2, 5], [1, 2, 5, 6]])                  # [PAD] read three times
    upstream = rng.standard_normal((2, 4, D))
    out, cache = emb.forward(ids)
    np.testing.assert_array_equal(out[0, 0], emb.weight.data[2])  # the lookup is the plain one
    emb.backward(upstream, cache)
    numeric = finite_difference(emb.weight.data, ids, upstream)
    assert np.abs(numeric[2]).max() > 0.1                         # unfrozen, the row would learn
    assert not emb.weight.grad[2].any()                           # frozen: exactly zero
    others = np.arange(V) != 2
    np.testing.assert_allclose(emb.weight.grad[others], numeric[others], rtol=1e-8, atol=1e-9)


def test_without_padding_idx_every_row_learns(rng):
    emb = Embedding(V, D, rng, dtype=np.float64)
    ids = np.array([[2, 0, 2, 5]])
    upstream = rng.standard_normal((1, 4, D))
    emb.backward(upstream, emb.forward(ids)[1])
    np.testing.assert_allclose(emb.weight.grad, finite_difference(emb.weight.data, ids, upstream),
                               rtol=1e-8, atol=1e-9)


def test_padding_row_starts_at_zero_and_the_other_rows_are_unchanged():
    plain = Embedding(V, D, np.random.default_rng(3))
    padded = Embedding(V, D, np.random.default_rng(3), padding_idx=6)
    assert not padded.weight.data[6].any() and plain.weight.data[6].any()
    np.testing.assert_array_equal(padded.weight.data[:6], plain.weight.data[:6])


@pytest.mark.parametrize("bad", [-1, V, 2.0, True, "0"])
def test_bad_padding_idx_is_named(bad, rng):
    with pytest.raises(ValueError, match=rf"padding_idx: expected None or an integer in \[0, {V}\)"):
        Embedding(V, D, rng, padding_idx=bad)


def test_seq2seq_pad_token_id_freezes_the_lookups_of_both_tables(rng):
    shared = EncoderDecoder(Seq2SeqConfig.bart(vocab_size=11, pad_token_id=1), rng)
    assert shared.tokens is shared.encoder.tokens and shared.tokens.padding_idx == 1
    separate = EncoderDecoder(Seq2SeqConfig(vocab_size=11, src_vocab_size=9, share_embeddings=False,
                                            pad_token_id=1), rng)
    assert separate.tokens.padding_idx == separate.encoder.tokens.padding_idx == 1
    with pytest.raises(ValueError, match=r"pad_token_id: expected None or an integer in \[0, 9\)"):
        Seq2SeqConfig(vocab_size=11, src_vocab_size=9, share_embeddings=False, pad_token_id=10)
    with pytest.raises(ValueError, match=r"pad_token_id: expected None or an integer in \[0, 11\)"):
        Seq2SeqConfig(vocab_size=11, pad_token_id=11)


def test_tied_head_still_updates_the_padding_row(rng):
    """The head reads the table directly, so row [PAD] learns from the logits only."""
    model = EncoderDecoder(Seq2SeqConfig.bart(vocab_size=11, d_model=8, pad_token_id=1),
                           rng, np.float64)
    src, tgt = np.array([[3, 1, 4]]), np.array([[2, 1, 5]])      # [PAD] read on both sides
    logits, cache = model.forward(src, tgt)
    upstream = rng.standard_normal(logits.shape)
    model.backward(upstream, cache)
    # with the lookups frozen, the row's gradient is the head's alone: d logits[..., 1] x h
    hidden = cache.decoder.head.x                                 # the head's input [B, N, d]
    np.testing.assert_allclose(model.tokens.weight.grad[1],
                               np.einsum("bn,bnd->d", upstream[..., 1], hidden), rtol=1e-12)


def test_old_configs_without_the_field_still_load():
    old = Seq2SeqConfig.bart(vocab_size=11).to_dict()
    del old["pad_token_id"]
    assert Seq2SeqConfig.from_dict(old).pad_token_id is None


def test_a_decoder_can_freeze_a_padding_row_and_llama_imports_it():
    from npformer import DecoderConfig, DecoderLM, cross_entropy
    from npformer.interop import decoder_config_from_hf, hf_config_from_decoder
    config = DecoderConfig.llama(vocab_size=11, d_model=8, n_heads=2, pad_token_id=3)
    model = DecoderLM(config, np.random.default_rng(0), np.float64)
    ids = np.array([[3, 1, 3, 2, 5]])                      # the padding id read at two positions
    logits, cache = model.forward(ids)
    model.backward(cross_entropy(logits, np.array([[1, 2, 5, 4, 0]]))[1], cache)
    assert np.all(model.tokens.weight.grad[3] == 0) and np.abs(model.tokens.weight.grad[1]).max() > 0
    exported = hf_config_from_decoder(config)
    assert exported["pad_token_id"] == 3 and decoder_config_from_hf(exported).pad_token_id == 3
    with pytest.raises(ValueError, match="pad_token_id=3 cannot be exported as GPT-2"):
        hf_config_from_decoder(DecoderConfig.gpt2(vocab_size=11, pad_token_id=3))
