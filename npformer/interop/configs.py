"""Config translation: a Hugging Face ``config.json`` <-> an npformer config, family by family.

    GPT-2           <-> DecoderConfig  (learned positions, LayerNorm, GELU, biases)
    Llama, Mixtral  <-> DecoderConfig  (RoPE with the "half" layout, RMSNorm, SwiGLU;
                                        Mixtral: every FFN a Mixture of Experts)
    BERT             -> EncoderConfig
    BART             -> Seq2SeqConfig

A setting npformer cannot express is refused, never approximated. On import the
ValueError names the config.json key (``config.json: hidden_act='gelu' cannot be
expressed by npformer (...)``); on export it names our config field
(``config: window=4 cannot be exported ...``).
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from ..t15_encoder import EncoderConfig
from ..t10_model import DecoderConfig
from ..t17_seq2seq import Seq2SeqConfig

FAMILIES = ("gpt2", "llama", "mixtral", "bert", "bart")

# Families we know by name but cannot express, and why (the message names the config key).
_NOT_EXPRESSIBLE = {
    "t5": "relative_attention_num_buckets: T5 adds learned relative-position buckets to the "
          "attention scores, which npformer's attention cannot express",
    "mt5": "relative_attention_num_buckets: mT5 uses T5's relative-position buckets, "
           "which npformer's attention cannot express",
}


def hf_config_dict(config):
    """A Hugging Face config given as a dict, a transformers config object or a path to config.json."""
    if isinstance(config, (str, os.PathLike)):
        return json.loads(Path(config).read_text(encoding="utf-8"))
    if hasattr(config, "to_dict"):
        return config.to_dict()
    if isinstance(config, dict):
        return dict(config)
    raise TypeError(f"config: expected a dict, a transformers config or a path to config.json, "
                    f"got {type(config).__name__}")


def family_of(hf):
    """The npformer family name of a Hugging Face config dict ('gpt2', 'llama', ...)."""
    model_type = hf.get("model_type")
    if model_type in _NOT_EXPRESSIBLE:
        raise ValueError(f"config.json: model_type {model_type!r} cannot be imported: "
                         f"{_NOT_EXPRESSIBLE[model_type]}")
    if model_type not in FAMILIES:
        raise ValueError(f"config.json: model_type {model_type!r} is not supported; "
                         f"supported: {', '.join(FAMILIES)}")
    return model_type


def _refuse(key, value, why):
    """An import refusal naming the config.json key."""
    raise ValueError(f"config.json: {key}={value!r} cannot be expressed by npformer ({why})")


def _need(hf, *keys):
    """ValueError naming the keys a config.json of this family must have and does not."""
    missing = [key for key in keys if key not in hf]
    if missing:
        raise ValueError(f"config.json: expected the {hf.get('model_type')} keys {missing}, "
                         f"not found")


def _activation(hf, key, default, supported):
    """Our name of the activation in ``hf[key]``, refused (naming the key) if unsupported."""
    act = hf.get(key, default)
    if act not in supported:
        _refuse(key, act, f"supported: {sorted(supported)}")
    return supported[act]


def _family_config(hf, family, kind, needed):
    """The config dict of ``family``; ValueError if it is another family or lacks a needed key."""
    hf = hf_config_dict(hf)
    if family_of(hf) != family:
        raise ValueError(f"config.json: model_type {hf.get('model_type')!r} is not {kind} "
                         f"npformer imports (expected {family!r})")
    _need(hf, *needed)
    return hf


def _require(config, target, **wanted):
    """An export refusal naming the first field of ``config`` that ``target`` cannot express."""
    for name, value in wanted.items():
        if getattr(config, name) != value:
            raise ValueError(f"config: {name}={getattr(config, name)!r} cannot be exported as "
                             f"{target} (it needs {name}={value!r})")


# -- GPT-2 ------------------------------------------------------------------------------------
_GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu",
                     "relu": "relu"}


def _gpt2_from_hf(hf):
    """GPT-2 config.json -> DecoderConfig (learned positions, LayerNorm, Conv1D projections)."""
    _need(hf, "vocab_size", "n_embd", "n_head", "n_layer", "n_positions")
    ffn = _activation(hf, "activation_function", "gelu_new", _GPT2_ACTIVATIONS)
    if not hf.get("scale_attn_weights", True):
        _refuse("scale_attn_weights", False, "attention always scales by 1/sqrt(D)")
    if hf.get("scale_attn_by_inverse_layer_idx", False):
        _refuse("scale_attn_by_inverse_layer_idx", True, "attention always scales by 1/sqrt(D)")
    if hf.get("add_cross_attention", False):
        _refuse("add_cross_attention", True, "a decoder-only model has no cross-attention")
    d = hf["n_embd"]
    return DecoderConfig.gpt2(
        vocab_size=hf["vocab_size"], d_model=d, n_heads=hf["n_head"], n_layers=hf["n_layer"],
        max_len=hf["n_positions"], ffn=ffn, ffn_hidden=hf.get("n_inner") or 4 * d,
        norm_eps=hf.get("layer_norm_epsilon", 1e-5),
        tie_embeddings=hf.get("tie_word_embeddings", True),
        init_std=hf.get("initializer_range", 0.02))


def _gpt2_to_hf(c, common):
    """DecoderConfig with learned positions -> GPT-2 config.json."""
    _require(c, "GPT-2 (learned positions)", norm="layernorm", attn_bias=True, ffn_bias=True,
             n_experts=0, pad_token_id=None)           # GPT-2's token table has no frozen row
    if c.n_kv_heads not in (None, c.n_heads):
        raise ValueError(f"config: n_kv_heads={c.n_kv_heads!r} cannot be exported as GPT-2 "
                         f"(learned positions) (it needs n_kv_heads={c.n_heads!r})")
    act = {ours: theirs for theirs, ours in _GPT2_ACTIVATIONS.items()
           if theirs != "gelu_pytorch_tanh"}.get(c.ffn)
    if act is None:
        raise ValueError(f"config: ffn={c.ffn!r} cannot be exported as GPT-2 "
                         f"(it needs one of {sorted(set(_GPT2_ACTIVATIONS.values()))})")
    return dict(common, model_type="gpt2", architectures=["GPT2LMHeadModel"],
                n_embd=c.d_model, n_head=c.n_heads, n_layer=c.n_layers, n_positions=c.max_len,
                n_inner=c.ffn_hidden or 4 * c.d_model, activation_function=act,
                layer_norm_epsilon=c.norm_eps, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


# -- Llama and Mixtral -----------------------------------------------------------------------
def _rope_base(hf):
    """RoPE base and a check that the scaling is the plain one (transformers 4 and 5 spellings)."""
    rope = hf.get("rope_parameters") or {}
    scaling = hf.get("rope_scaling") or {}
    kind = rope.get("rope_type", scaling.get("rope_type", scaling.get("type", "default")))
    if kind not in ("default", None):
        _refuse("rope_type", kind, "only plain RoPE is implemented, no frequency scaling")
    return float(rope.get("rope_theta", hf.get("rope_theta", 10000.0)))


def _llama_from_hf(hf):
    """Llama or Mixtral config.json -> DecoderConfig (RoPE "half" layout, RMSNorm, SwiGLU)."""
    _need(hf, "vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers",
          "intermediate_size")
    d, heads = hf["hidden_size"], hf["num_attention_heads"]
    if hf.get("hidden_act", "silu") != "silu":
        _refuse("hidden_act", hf["hidden_act"], "the gated FFN is SwiGLU (SiLU gate)")
    if hf.get("head_dim") not in (None, d // heads):
        _refuse("head_dim", hf["head_dim"], f"head width must be hidden_size / "
                f"num_attention_heads = {d // heads}")
    if hf.get("pretraining_tp", 1) != 1:
        _refuse("pretraining_tp", hf["pretraining_tp"], "only 1 is the exact model")
    config = dict(vocab_size=hf["vocab_size"], d_model=d, n_heads=heads,
                  n_kv_heads=hf.get("num_key_value_heads") or heads,
                  n_layers=hf["num_hidden_layers"], max_len=hf.get("max_position_embeddings", 2048),
                  ffn_hidden=hf["intermediate_size"], norm_eps=hf.get("rms_norm_eps", 1e-6),
                  rope_theta=_rope_base(hf), tie_embeddings=hf.get("tie_word_embeddings", False),
                  attn_bias=hf.get("attention_bias", False), ffn_bias=hf.get("mlp_bias", False),
                  window=hf.get("sliding_window"), init_std=hf.get("initializer_range", 0.02),
                  pad_token_id=hf.get("pad_token_id"))       # torch freezes that row when set
    if hf["model_type"] == "mixtral":
        config.update(_mixtral_moe_from_hf(hf))
    return DecoderConfig.llama(**config)


def _mixtral_moe_from_hf(hf):
    """Mixtral's MoE settings as DecoderConfig fields (see npformer.t14_moe).

    The router loss becomes Hugging Face's: ``moe_aux_objective="pooled"`` (one
    load-balancing loss from the routing of all layers pooled, padded positions left
    out) weighted by ``moe_aux_weight = router_aux_loss_coef``. transformers adds that
    term to its loss only when the model runs with ``output_router_logits=True``;
    npformer's backward always adds it (set ``moe_aux_weight=0`` for CE alone).
    """
    _need(hf, "num_local_experts", "num_experts_per_tok")
    if hf.get("router_jitter_noise", 0.0):
        _refuse("router_jitter_noise", hf["router_jitter_noise"], "the router is deterministic")
    return dict(n_experts=hf["num_local_experts"], top_k=hf["num_experts_per_tok"],
                moe_aux_weight=hf.get("router_aux_loss_coef", 0.001), moe_aux_objective="pooled")


def _check_mixtral_objective(c):
    """Refuse a router loss Hugging Face cannot train: "per_layer" over 2 or more MoE layers.

    (With one layer, or a zero weight, the two objectives are the same loss.)
    """
    if c.moe_aux_objective != "pooled" and c.n_layers > 1 and c.moe_aux_weight != 0:
        raise ValueError(
            f"config: moe_aux_objective={c.moe_aux_objective!r} cannot be exported as Mixtral "
            f"(it needs moe_aux_objective='pooled': Hugging Face computes one router loss from "
            f"all {c.n_layers} layers' routing pooled; the weights are unaffected, so set "
            f"config.moe_aux_objective='pooled', or moe_aux_weight=0, to export)")


def _llama_to_hf(c, common):
    """DecoderConfig with RoPE -> Llama config.json, or Mixtral's when the FFN is a MoE."""
    _require(c, "Llama (RoPE)", norm="rmsnorm", ffn="swiglu", rope_layout="half",
             rope_fraction=1.0)
    llama = dict(common, hidden_size=c.d_model, num_attention_heads=c.n_heads,
                 num_key_value_heads=c.n_kv_heads or c.n_heads, head_dim=c.head_dim,
                 num_hidden_layers=c.n_layers, intermediate_size=c.ffn_hidden or 4 * c.d_model,
                 hidden_act="silu", max_position_embeddings=c.max_len, rms_norm_eps=c.norm_eps,
                 rope_theta=c.rope_theta,
                 rope_parameters={"rope_type": "default", "rope_theta": c.rope_theta},
                 attention_dropout=0.0)
    if not c.n_experts:
        return dict(llama, model_type="llama", architectures=["LlamaForCausalLM"],
                    attention_bias=c.attn_bias, mlp_bias=c.ffn_bias)
    _require(c, "Mixtral", attn_bias=False, ffn_bias=False)
    _check_mixtral_objective(c)
    # output_router_logits=True: transformers then adds the router loss to its training loss,
    # as npformer's backward does (with False it trains cross-entropy alone)
    return dict(llama, model_type="mixtral", architectures=["MixtralForCausalLM"],
                num_local_experts=c.n_experts, num_experts_per_tok=c.top_k,
                router_aux_loss_coef=c.moe_aux_weight, router_jitter_noise=0.0,
                sliding_window=None, output_router_logits=c.moe_aux_weight != 0)


# -- decoders: the family chosen by the config -------------------------------------------------
def decoder_config_from_hf(hf):
    """A ``DecoderConfig`` equal to a GPT-2, Llama or Mixtral config dict; ValueError naming
    the key of any setting npformer cannot express."""
    hf = hf_config_dict(hf)
    family = family_of(hf)
    if family == "gpt2":
        return _gpt2_from_hf(hf)
    if family in ("llama", "mixtral"):
        return _llama_from_hf(hf)
    kind = "encoder" if family == "bert" else "encoder-decoder"
    expected = "encoder_config_from_hf" if family == "bert" else "seq2seq_config_from_hf"
    raise ValueError(f"config.json: model_type {family!r} is an {kind}; use {expected}")


def hf_config_from_decoder(config, dtype=np.float32):
    """A GPT-2, Llama or Mixtral config dict for transformers equal to a ``DecoderConfig``.

    GPT-2 when positions are learned, Llama when they are RoPE, Mixtral when the FFN
    is a Mixture of Experts; ValueError naming the first field none of them can express.
    A Mixtral's router loss must be Hugging Face's (``moe_aux_objective="pooled"``,
    unless one layer or a zero weight makes the two objectives equal); its weight becomes
    ``router_aux_loss_coef``, with ``output_router_logits`` True when it is not zero.
    """
    _require(config, "GPT-2 or Llama", prenorm=True, causal=True, window=None)
    common = dict(vocab_size=config.vocab_size, tie_word_embeddings=config.tie_embeddings,
                  initializer_range=config.init_std, dtype=np.dtype(dtype).name,
                  bos_token_id=None, eos_token_id=None, pad_token_id=config.pad_token_id,
                  use_cache=True)
    if config.positions == "learned":
        return _gpt2_to_hf(config, common)
    if config.positions == "rope":
        return _llama_to_hf(config, common)
    raise ValueError(f"config: positions={config.positions!r} cannot be exported (GPT-2 needs "
                     f"'learned', Llama needs 'rope')")


# -- BERT ---------------------------------------------------------------------------------------
# BART spells its activations the same way.
_BERT_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                     "relu": "relu"}


def encoder_config_from_hf(hf, pooler=False):
    """An ``EncoderConfig`` equal to a BERT config dict; ValueError naming any key npformer
    cannot express.

    ``pad_token_id`` (BERT's default 0) becomes the frozen token row, as torch's
    ``padding_idx``. ``pooler``: whether the checkpoint holds BERT's pooler; config.json
    does not say, so ``from_hf`` decides from the tensors (``pooler.dense.weight``).
    """
    hf = _family_config(hf, "bert", "an encoder", (
        "vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers",
        "max_position_embeddings", "intermediate_size"))
    ffn = _activation(hf, "hidden_act", "gelu", _BERT_ACTIVATIONS)
    kind = hf.get("position_embedding_type", "absolute")
    if kind != "absolute":
        _refuse("position_embedding_type", kind, "relative-position attention scores are not "
                "implemented; only absolute learned positions")
    for key in ("is_decoder", "add_cross_attention"):
        if hf.get(key, False):
            _refuse(key, True, "npformer's Encoder is bidirectional, without cross-attention")
    return EncoderConfig.bert(
        vocab_size=hf["vocab_size"], d_model=hf["hidden_size"], n_heads=hf["num_attention_heads"],
        n_layers=hf["num_hidden_layers"], max_len=hf["max_position_embeddings"],
        type_vocab_size=hf.get("type_vocab_size", 2), ffn=ffn, ffn_hidden=hf["intermediate_size"],
        norm_eps=hf.get("layer_norm_eps", 1e-12),
        init_std=hf.get("initializer_range", 0.02), pad_token_id=hf.get("pad_token_id", 0),
        pooler=bool(pooler))


# -- BART ---------------------------------------------------------------------------------------
def seq2seq_config_from_hf(hf):
    """A ``Seq2SeqConfig`` equal to a BART config dict; ValueError naming any key npformer
    cannot express. ``pad_token_id`` (BART's default 1) becomes the frozen row of the
    shared token table, as torch's ``padding_idx``."""
    hf = _family_config(hf, "bart", "an encoder-decoder", (
        "vocab_size", "d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads",
        "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "max_position_embeddings"))
    ffn = _activation(hf, "activation_function", "gelu", _BERT_ACTIVATIONS)
    for a, b in (("encoder_attention_heads", "decoder_attention_heads"),
                 ("encoder_ffn_dim", "decoder_ffn_dim")):
        if hf[a] != hf[b]:
            _refuse(b, hf[b], f"npformer's encoder and decoder share one width; {a}={hf[a]}")
    if not hf.get("tie_word_embeddings", True):
        _refuse("tie_word_embeddings", False, "one token table shared by encoder, decoder and head")
    if hf.get("add_bias_logits", False):
        _refuse("add_bias_logits", True, "the logits bias is final_logits_bias only")
    d = hf["d_model"]
    return Seq2SeqConfig.bart(
        vocab_size=hf["vocab_size"], d_model=d, n_heads=hf["encoder_attention_heads"],
        n_encoder_layers=hf["encoder_layers"], n_decoder_layers=hf["decoder_layers"],
        max_len=hf["max_position_embeddings"], ffn=ffn, ffn_hidden=hf["encoder_ffn_dim"],
        norm_eps=1e-5,
        embed_scale=math.sqrt(d) if hf.get("scale_embedding", False) else 1.0,
        init_std=hf.get("init_std", 0.02), pad_token_id=hf.get("pad_token_id", 1))
