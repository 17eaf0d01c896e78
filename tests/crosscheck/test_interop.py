"""npformer.interop: checkpoint directories in and out, BF16, legacy names, and clear errors.

The export tests load npformer's files with transformers' own ``from_pretrained``
and compare its logits with npformer's; the import tests read directories
written by transformers' own ``save_pretrained``.
"""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from crosscheck_util import check  # noqa: E402
from hf_util import V, bart, bert, build_hf, gpt2, llama, mixtral  # noqa: E402

from npformer import DecoderConfig, DecoderLM  # noqa: E402
from npformer.interop import bf16_to_float32, from_hf, hf_state_dict, read_safetensors, save_hf

pytestmark = pytest.mark.crosscheck


def _random_decoder(config, rng, dtype=np.float32):
    model = DecoderLM(config, rng, dtype)
    for _, p in model.named_parameters():        # gains != 1, biases != 0
        p.data[...] = (rng.standard_normal(p.shape) * 0.2 + (p.data.ndim == 1) * 0.5).astype(dtype)
    return model


EXPORTS = {
    "GPT-2 tied": DecoderConfig.gpt2(vocab_size=V, d_model=16, n_heads=4, n_layers=2, max_len=24),
    "GPT-2 untied, exact GELU": DecoderConfig.gpt2(vocab_size=V, d_model=16, n_heads=2, n_layers=1,
                                                   max_len=24, tie_embeddings=False, ffn="gelu",
                                                   ffn_hidden=24),
    "Llama GQA": DecoderConfig.llama(vocab_size=V, d_model=16, n_heads=4, n_kv_heads=2, n_layers=2,
                                     max_len=32, ffn_hidden=40, rope_theta=300.0),
    "Llama tied, biases": DecoderConfig.llama(vocab_size=V, d_model=16, n_heads=2, n_layers=1,
                                              max_len=32, tie_embeddings=True, attn_bias=True,
                                              ffn_bias=True),
    "Mixtral": DecoderConfig.mixtral(vocab_size=V, d_model=16, n_heads=4, n_kv_heads=2, n_layers=2,
                                     max_len=32, ffn_hidden=20, n_experts=4, top_k=2,
                                     moe_aux_objective="pooled"),
}


@pytest.mark.parametrize("name", list(EXPORTS))
def test_export_loads_in_transformers_with_equal_logits(name, tmp_path, rng):
    ours = _random_decoder(EXPORTS[name], rng)
    save_hf(ours, tmp_path)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, attn_implementation="eager", dtype=torch.float32).eval()
    ids = rng.integers(0, V, (2, 9))
    with torch.no_grad():
        ref = theirs(torch.tensor(ids)).logits
    check(f"interop: export {name} (float32)", "logits", ours(ids), ref, 1e-4)
    back = from_hf(tmp_path)                       # and the directory reads back exactly
    for pname, p in ours.named_parameters():
        np.testing.assert_array_equal(dict(back.named_parameters())[pname].data, p.data, err_msg=pname)


def test_export_float64_gpt2_is_exact(tmp_path, rng):
    ours = _random_decoder(EXPORTS["GPT-2 tied"], rng, np.float64)
    save_hf(ours, tmp_path)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, attn_implementation="eager", dtype=torch.float64).eval()
    ids = rng.integers(0, V, (2, 9))
    with torch.no_grad():
        ref = theirs(torch.tensor(ids)).logits
    check("interop: export GPT-2 (float64)", "logits", ours(ids), ref, 1e-12)


BUILDERS = {"gpt2": gpt2, "llama": llama, "mixtral": mixtral, "bert": bert, "bart": bart}


@pytest.mark.parametrize("family", list(BUILDERS))
def test_import_from_save_pretrained_directory(family, tmp_path):
    model_class, config = BUILDERS[family]()
    theirs = build_hf(model_class, config, np.float32)
    theirs.save_pretrained(tmp_path)
    ours = from_hf(tmp_path)
    same = from_hf(theirs.state_dict(), config)
    for name, p in same.named_parameters():
        np.testing.assert_array_equal(dict(ours.named_parameters())[name].data, p.data, err_msg=name)


def test_import_from_sharded_save_pretrained_directory(tmp_path):
    model_class, config = llama()
    theirs = build_hf(model_class, config, np.float32)
    theirs.save_pretrained(tmp_path, max_shard_size="20KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1 and not (tmp_path / "model.safetensors").exists()
    ours = dict(from_hf(tmp_path).named_parameters())
    for name, p in from_hf(theirs.state_dict(), config).named_parameters():
        np.testing.assert_array_equal(ours[name].data, p.data, err_msg=name)


def test_bf16_bits_widen_exactly():
    # sign | 8 exponent bits | 7 mantissa bits: the top half of a float32
    bits = np.array([0x3F80, 0xC000, 0x3EAB, 0x0000, 0x8000, 0x7F80, 0x0001], np.uint16)
    expected = np.array([1.0, -2.0, 0.333984375, 0.0, -0.0, np.inf, 2.0 ** -133], np.float32)
    np.testing.assert_array_equal(bf16_to_float32(bits), expected)
    assert np.signbit(bf16_to_float32(bits)[4])


def test_bf16_checkpoint_reads_exact_values(tmp_path):
    model_class, config = llama()
    theirs = build_hf(model_class, config, np.float32).to(torch.bfloat16)
    theirs.save_pretrained(tmp_path)
    header_len = int.from_bytes((tmp_path / "model.safetensors").read_bytes()[:8], "little")
    header = json.loads((tmp_path / "model.safetensors").read_bytes()[8:8 + header_len])
    assert {v["dtype"] for k, v in header.items() if k != "__metadata__"} == {"BF16"}
    tensors = read_safetensors(tmp_path / "model.safetensors")
    for name, p in theirs.state_dict().items():
        np.testing.assert_array_equal(tensors[name], p.float().numpy(), err_msg=name)
    ours = from_hf(tmp_path)
    widened = model_class(config).eval()     # a fresh float32 model (its RoPE table not rounded)
    widened.load_state_dict({k: v.float() for k, v in theirs.state_dict().items()})
    ids = np.arange(10)[None] % V
    with torch.no_grad():
        ref = widened(torch.tensor(ids)).logits
    check("interop: BF16 checkpoint (as float32)", "logits", ours(ids), ref, 1e-4)


def test_original_gpt2_names_without_prefix_and_buffers(rng):
    """The hub's gpt2 files: 'h.0.attn...' without 'transformer.', plus old attn.bias buffers."""
    model_class, config = gpt2()
    theirs = build_hf(model_class, config, np.float32)
    state = {k.removeprefix("transformer."): v for k, v in theirs.state_dict().items()
             if k != "lm_head.weight"}
    state["h.0.attn.bias"] = torch.ones(1, 1, 32, 32)            # causal-mask buffer
    state["h.0.attn.masked_bias"] = torch.tensor(-1e4)
    ours = from_hf(state, config)
    ids = rng.integers(0, V, (1, 7))
    with torch.no_grad():
        ref = theirs(torch.tensor(ids)).logits
    check("interop: GPT-2 hub names", "logits", ours(ids), ref, 1e-4)


def test_mixtral_per_expert_names_equal_fused(rng):
    """The hub's Mixtral files name each expert (block_sparse_moe.experts.{e}.w1/w2/w3)."""
    model_class, config = mixtral()
    theirs = build_hf(model_class, config, np.float32)
    fused = from_hf(theirs.state_dict(), config)
    per_expert = from_hf(hf_state_dict(fused, experts="per_expert"), config)
    assert any("block_sparse_moe.experts.3.w2" in k for k in hf_state_dict(fused))
    for name, p in fused.named_parameters():
        np.testing.assert_array_equal(dict(per_expert.named_parameters())[name].data, p.data)


# -- errors ------------------------------------------------------------------------------------
def _llama_state():
    model_class, config = llama()
    return dict(build_hf(model_class, config, np.float32).state_dict()), config


def test_missing_key_is_named():
    state, config = _llama_state()
    del state["model.layers.1.mlp.up_proj.weight"]
    with pytest.raises(ValueError, match=r"missing keys \['model.layers.1.mlp.up_proj.weight'\]"):
        from_hf(state, config)


def test_unexpected_key_is_named_unless_not_strict():
    state, config = _llama_state()
    state["model.layers.0.mlp.extra.weight"] = torch.zeros(3)
    with pytest.raises(ValueError, match=r"unexpected keys \['model.layers.0.mlp.extra.weight'\]"):
        from_hf(state, config)
    from_hf(state, config, strict=False)


def test_shape_mismatch_is_named():
    state, config = _llama_state()
    state["model.layers.0.self_attn.k_proj.weight"] = torch.zeros(32, 32)   # MHA-sized, not GQA
    with pytest.raises(ValueError, match=r"'model.layers.0.self_attn.k_proj.weight' expected "
                                         r"shape \(16, 32\), got \(32, 32\)"):
        from_hf(state, config)


def test_bert_masked_lm_head_needs_strict_false():
    model_class, config = bert()
    theirs = transformers.BertForMaskedLM(config)
    with pytest.raises(ValueError, match=r"unexpected keys \['cls.predictions"):
        from_hf(theirs.state_dict(), config)
    encoder = from_hf(theirs.state_dict(), config, strict=False)
    np.testing.assert_array_equal(encoder.tokens.weight.data,
                                  theirs.bert.embeddings.word_embeddings.weight.detach().numpy())


def test_unsupported_architectures(tmp_path):
    t5 = transformers.T5Config(d_model=16, num_heads=2, d_kv=8, d_ff=32, num_layers=1, vocab_size=V)
    with pytest.raises(ValueError, match="relative_attention_num_buckets"):
        from_hf({}, t5)
    neox = transformers.GPTNeoXConfig(hidden_size=16, num_attention_heads=2, num_hidden_layers=1,
                                      intermediate_size=32, vocab_size=V)
    with pytest.raises(ValueError, match="model_type 'gpt_neox' is not supported"):
        from_hf({}, neox)
    (tmp_path / "config.json").write_text(json.dumps(t5.to_dict()))
    with pytest.raises(ValueError, match="relative_attention_num_buckets"):
        from_hf(tmp_path)


@pytest.mark.parametrize("family,key,value", [
    ("llama", "rope_parameters", {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}),
    ("llama", "hidden_act", "gelu"),
    ("llama", "head_dim", 16),
    ("gpt2", "scale_attn_by_inverse_layer_idx", True),
    ("gpt2", "activation_function", "gelu_fast"),
    ("bert", "position_embedding_type", "relative_key"),
    ("mixtral", "router_jitter_noise", 0.1),
    ("bart", "decoder_attention_heads", 2),
    ("bart", "activation_function", "swish"),
])
def test_inexpressible_configs_name_their_key(family, key, value):
    model_class, config = BUILDERS[family]()
    hf = config.to_dict()
    hf[key] = value
    shown = "rope_type" if key == "rope_parameters" else key
    with pytest.raises(ValueError, match=rf"config.json: {shown}="):
        from_hf({}, hf)


@pytest.mark.parametrize("override,field", [
    (dict(prenorm=False), "prenorm"), (dict(window=4), "window"),
    (dict(rope_layout="interleaved"), "rope_layout"), (dict(norm="layernorm"), "norm"),
    (dict(positions="sinusoidal"), "positions"),
])
def test_export_refuses_inexpressible_models(override, field, tmp_path):
    config = DecoderConfig.llama(vocab_size=V, d_model=16, n_heads=2, **override)
    with pytest.raises(ValueError, match=rf"config: {field}="):
        save_hf(DecoderLM(config), tmp_path)
    assert not (tmp_path / "model.safetensors").exists()


def test_bad_sources():
    with pytest.raises(ValueError, match="config: a state dict needs its config"):
        from_hf({"a": np.zeros(2)})
    with pytest.raises(TypeError, match="source: expected a checkpoint directory or a state dict"):
        from_hf(42)


def test_directory_without_checkpoint(tmp_path):
    with pytest.raises(ValueError, match="config.json"):
        from_hf(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(llama()[1].to_dict()))
    with pytest.raises(ValueError, match="expected model.safetensors"):
        from_hf(tmp_path)
