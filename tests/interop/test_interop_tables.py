"""npformer.interop's name tables and config translation, without torch.

Export then import gives every model back bit for bit, for all five families (each
table covers every parameter, and its two directions invert each other); the fused
[Q | K | V] columns, nn.Linear's [d_out, d_in] storage and BART's two leading
position rows are where Hugging Face's model code puts them; a config exported and
imported is the same config; refusals name the key or field. (Which of their
tensors each name is, is checked against transformers in tests/crosscheck.)
"""
import dataclasses

import numpy as np
import pytest

from npformer import (DecoderConfig, DecoderLM, Encoder, EncoderConfig, EncoderDecoder,
                      Seq2SeqConfig)
from npformer.interop import decoder_config_from_hf, from_hf, hf_config_from_decoder, hf_state_dict

BERT_JSON = dict(model_type="bert", vocab_size=13, hidden_size=8, num_attention_heads=2,
                 num_hidden_layers=2, max_position_embeddings=10, intermediate_size=12,
                 type_vocab_size=2, hidden_act="gelu", layer_norm_eps=1e-12)
BART_JSON = dict(model_type="bart", vocab_size=13, d_model=8, encoder_layers=1, decoder_layers=2,
                 encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=12,
                 decoder_ffn_dim=12, max_position_embeddings=10)
DECODERS = {
    "gpt2": DecoderConfig.gpt2(vocab_size=13, d_model=8, n_heads=2, n_layers=2, max_len=10,
                               ffn_hidden=12),
    "gpt2 untied": DecoderConfig.gpt2(vocab_size=13, d_model=8, n_heads=2, n_layers=1, max_len=10,
                                      ffn_hidden=12, tie_embeddings=False, ffn="gelu"),
    "llama": DecoderConfig.llama(vocab_size=13, d_model=8, n_heads=4, n_kv_heads=2, n_layers=2,
                                 max_len=10, ffn_hidden=12, rope_theta=500.0),
    "llama biases": DecoderConfig.llama(vocab_size=13, d_model=8, n_heads=2, n_kv_heads=2,
                                        n_layers=1, max_len=10, ffn_hidden=12, attn_bias=True,
                                        ffn_bias=True, tie_embeddings=True),
    "mixtral": DecoderConfig.mixtral(vocab_size=13, d_model=8, n_heads=2, n_kv_heads=1, n_layers=2,
                                     max_len=10, ffn_hidden=6, n_experts=3, top_k=2,
                                     moe_aux_weight=0.02, moe_aux_objective="pooled"),
}


def _randomised(model, rng):
    """Every parameter random (gains != 1, biases != 0), so that a swapped pair shows."""
    for _, p in model.named_parameters():
        p.data[...] = rng.standard_normal(p.shape)
    return model


def _assert_same_parameters(a, b):
    theirs = dict(b.named_parameters())
    assert sorted(theirs) == sorted(name for name, _ in a.named_parameters())
    for name, p in a.named_parameters():
        np.testing.assert_array_equal(theirs[name].data, p.data, err_msg=name)


@pytest.mark.parametrize("name,experts", [(name, "per_expert") for name in DECODERS]
                         + [("mixtral", "fused")])
def test_decoder_export_then_import_is_exact(name, experts, rng):
    model = _randomised(DecoderLM(DECODERS[name], rng), rng)
    state = hf_state_dict(model, experts=experts)
    assert any("block_sparse_moe" in k for k in state) == (name == "mixtral" and experts == "per_expert")
    _assert_same_parameters(model, from_hf(state, hf_config_from_decoder(model.config)))


def test_bert_export_then_import_is_exact(rng):
    model = _randomised(Encoder(EncoderConfig.bert(vocab_size=13, d_model=8, n_heads=2, n_layers=2,
                                                   max_len=10, ffn_hidden=12), rng), rng)
    _assert_same_parameters(model, from_hf(hf_state_dict(model), BERT_JSON))


def test_bart_export_then_import_is_exact(rng):
    config = Seq2SeqConfig.bart(vocab_size=13, d_model=8, n_heads=2, n_encoder_layers=1,
                                n_decoder_layers=2, max_len=10, ffn_hidden=12)
    model = _randomised(EncoderDecoder(config, rng), rng)
    state = hf_state_dict(model)
    # BartLearnedPositionalEmbedding has max_len + 2 rows and reads row position + 2
    assert state["model.decoder.embed_positions.weight"].shape == (12, 8)
    np.testing.assert_array_equal(state["model.decoder.embed_positions.weight"][2:],
                                  model.positions.weight.data)
    np.testing.assert_array_equal(state["final_logits_bias"], model.logits_bias.data[None])
    _assert_same_parameters(model, from_hf(state, BART_JSON))


def test_fused_qkv_columns_and_linear_transpose(rng):
    """Ours: x @ W_qkv, columns [Q | K | V] = [H*D | H_kv*D | H_kv*D]; theirs: x @ W.T per projection."""
    config = DECODERS["llama"]
    model = _randomised(DecoderLM(config, rng), rng)
    state, params = hf_state_dict(model), dict(model.named_parameters())
    qkv = params["blocks.1.attn.qkv.weight"].data                        # [d, (H + 2 H_kv) D]
    H, kv, D = config.n_heads, config.n_kv_heads, config.head_dim
    parts = {"q": qkv[:, :H * D], "k": qkv[:, H * D:(H + kv) * D], "v": qkv[:, (H + kv) * D:]}
    for p, columns in parts.items():
        np.testing.assert_array_equal(state[f"model.layers.1.self_attn.{p}_proj.weight"], columns.T)
    np.testing.assert_array_equal(state["model.layers.1.mlp.down_proj.weight"],
                                  params["blocks.1.ffn.down.weight"].data.T)
    gpt2 = _randomised(DecoderLM(DECODERS["gpt2"], rng), rng)      # Conv1D: [d_in, d_out] as ours
    np.testing.assert_array_equal(hf_state_dict(gpt2)["transformer.h.0.attn.c_attn.weight"],
                                  dict(gpt2.named_parameters())["blocks.0.attn.qkv.weight"].data)


@pytest.mark.parametrize("name", list(DECODERS))
def test_decoder_config_export_then_import_is_the_same_config(name):
    assert decoder_config_from_hf(hf_config_from_decoder(DECODERS[name])) == DECODERS[name]


def test_missing_config_keys_are_named():
    with pytest.raises(ValueError, match=r"expected the llama keys \['hidden_size', "
                                         r"'num_attention_heads'"):
        decoder_config_from_hf({"model_type": "llama", "vocab_size": 10})
    with pytest.raises(ValueError, match="is an encoder; use encoder_config_from_hf"):
        decoder_config_from_hf(BERT_JSON)


@pytest.mark.parametrize("config,field", [
    (DecoderConfig.mixtral(vocab_size=13, d_model=8, n_heads=2, attn_bias=True), "attn_bias"),
    (DecoderConfig.gpt2(vocab_size=13, d_model=8, n_heads=2, n_kv_heads=1), "n_kv_heads"),
    (DecoderConfig.gpt2(vocab_size=13, d_model=8, n_heads=2, ffn="swiglu"), "ffn"),
    (DecoderConfig.gpt2(vocab_size=13, d_model=8, n_heads=2, causal=False), "causal"),
])
def test_export_refusals_name_the_field(config, field):
    with pytest.raises(ValueError, match=rf"config: {field}="):
        hf_config_from_decoder(config)


def test_hf_state_dict_arguments(rng):
    with pytest.raises(TypeError, match="model: expected a DecoderLM, Encoder or EncoderDecoder"):
        hf_state_dict(object())
    with pytest.raises(ValueError, match="experts: expected 'per_expert' or 'fused', got 'both'"):
        hf_state_dict(DecoderLM(DECODERS["mixtral"], rng), experts="both")


def test_mixtral_router_loss_is_hugging_faces_both_ways():
    """Import selects HF's objective (pooled over the layers) with HF's coefficient; export
    refuses a per-layer loss over several layers, where the two objectives differ."""
    hf = hf_config_from_decoder(DECODERS["mixtral"])
    assert hf["router_aux_loss_coef"] == 0.02 and hf["output_router_logits"] is True
    hf["router_aux_loss_coef"] = 0.005
    config = decoder_config_from_hf(hf)
    assert (config.moe_aux_objective, config.moe_aux_weight) == ("pooled", 0.005)
    per_layer = dataclasses.replace(DECODERS["mixtral"], moe_aux_objective="per_layer")
    with pytest.raises(ValueError, match=r"config: moe_aux_objective='per_layer' cannot be "
                                         r"exported as Mixtral \(it needs moe_aux_objective='pooled'"):
        hf_config_from_decoder(per_layer)
    # one layer, or no router loss at all: the objectives agree, so the export is exact
    assert hf_config_from_decoder(dataclasses.replace(per_layer, n_layers=1))["model_type"] == "mixtral"
    silent = hf_config_from_decoder(dataclasses.replace(per_layer, moe_aux_weight=0.0))
    assert silent["router_aux_loss_coef"] == 0.0 and silent["output_router_logits"] is False


def test_bert_pooler_round_trip_and_layout(rng):
    """Our pooler [d_in, d_out] is their nn.Linear pooler.dense, stored [d_out, d_in]; from_hf
    turns the pooler on exactly when the tensors hold it."""
    config = EncoderConfig.bert(vocab_size=13, d_model=8, n_heads=2, n_layers=1, max_len=10,
                                ffn_hidden=12, pooler=True)
    model = _randomised(Encoder(config, rng), rng)
    state = hf_state_dict(model)
    np.testing.assert_array_equal(state["pooler.dense.weight"], model.pooler.weight.data.T)
    np.testing.assert_array_equal(state["pooler.dense.bias"], model.pooler.bias.data)
    back = from_hf(state, dict(BERT_JSON, num_hidden_layers=1))
    assert back.config.pooler
    _assert_same_parameters(model, back)
    prefixed = {"bert." + name: array for name, array in state.items()}     # a task model's names
    assert from_hf(prefixed, dict(BERT_JSON, num_hidden_layers=1)).config.pooler
    del state["pooler.dense.weight"], state["pooler.dense.bias"]
    assert not from_hf(state, dict(BERT_JSON, num_hidden_layers=1)).config.pooler


@pytest.mark.parametrize("json,key,default", [(BERT_JSON, "pad_token_id", 0),
                                              (BART_JSON, "pad_token_id", 1)])
def test_pad_token_id_becomes_the_frozen_row(json, key, default):
    """BERT's [PAD] defaults to 0 and BART's to 1 (transformers' config defaults); an explicit
    null means no frozen row."""
    from npformer.interop import encoder_config_from_hf, seq2seq_config_from_hf
    translate = encoder_config_from_hf if json is BERT_JSON else seq2seq_config_from_hf
    assert translate(json).pad_token_id == default
    assert translate(dict(json, **{key: 5})).pad_token_id == 5
    assert translate(dict(json, **{key: None})).pad_token_id is None
    with pytest.raises(ValueError, match=r"pad_token_id: expected None or an integer in \[0, 13\)"):
        translate(dict(json, **{key: 13}))
