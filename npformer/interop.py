"""Hugging Face interop: open a real checkpoint in npformer, and save npformer models for transformers.

A Hugging Face checkpoint is a directory with ``config.json`` (the shape of the
model) and ``model.safetensors`` (named tensors). Importing means three things:

1. translate the config into ours (``decoder_config_from_hf`` ...), refusing
   any setting our model cannot express, with the config key in the message;
2. map every tensor name to our parameter name (one table per family below);
3. fix the layouts: PyTorch's nn.Linear stores W as [d_out, d_in], ours is
   [d_in, d_out] (GPT-2's Conv1D is already [in, out]); our attention fuses
   Q, K and V into one ``qkv`` Linear with columns [H*D | H_kv*D | H_kv*D].

Families: GPT-2, Llama and Mixtral -> ``DecoderLM``; BERT -> ``Encoder``;
BART -> ``EncoderDecoder``. Llama-family RoPE rotates feature i with feature
i + D/2 (``rope_layout="half"``). BF16 tensors (NumPy has no such type) are
widened to float32 bit-exactly. T5 is refused: its relative-position buckets
have no counterpart in npformer's attention.

    model = from_hf("path/to/checkpoint")     # or from_hf(state_dict, config)
    save_hf(model, "out/")                    # transformers.AutoModelForCausalLM loads it
    hf_state_dict(model)                      # {their name: array}; grads=True for gradients

Reading and writing ``.safetensors`` needs the optional extra ``pip install npformer[hf]``;
this module imports nothing optional until a file is touched.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .fileio import atomic_write, write_json
from .model import DecoderConfig, DecoderLM

FAMILIES = ("gpt2", "llama", "mixtral", "bert", "bart")

# Tensors some checkpoints carry that are not parameters (recomputed buffers): skipped.
_BUFFERS = re.compile(r"(^|\.)(rotary_emb\.(inv_freq|original_inv_freq)|attn\.(bias|masked_bias)"
                      r"|embeddings\.position_ids|embeddings\.token_type_ids)$")

# Families we know by name but cannot express, and why (the message names the config key).
_NOT_EXPRESSIBLE = {
    "t5": "relative_attention_num_buckets: T5 adds learned relative-position buckets to the "
          "attention scores, which npformer's attention cannot express",
    "mt5": "relative_attention_num_buckets: mT5 uses T5's relative-position buckets, "
           "which npformer's attention cannot express",
}


# -- safetensors files --------------------------------------------------------------------
def _safetensors_header(path):
    """The JSON header of a .safetensors file and the byte offset where its data starts."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    return header, 8 + size


def bf16_to_float32(raw):
    """uint16 bit patterns of bfloat16 -> float32, exactly: bf16 is the top half of a float32."""
    return (np.asarray(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def read_safetensors(path):
    """{name: ndarray} from a ``.safetensors`` file (via ``safetensors.numpy``; BF16 widened to float32)."""
    try:
        from safetensors import safe_open
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("reading .safetensors needs the 'safetensors' package: "
                          "pip install 'npformer[hf]'") from error
    header, data_start = _safetensors_header(path)
    tensors = {}
    with safe_open(str(path), framework="numpy") as f:
        for name in f.keys():
            info = header[name]
            if info["dtype"] == "BF16":          # NumPy has no bfloat16: read the raw bits
                start, end = info["data_offsets"]
                raw = np.fromfile(path, dtype="<u2", count=(end - start) // 2,
                                  offset=data_start + start)
                tensors[name] = bf16_to_float32(raw).reshape(info["shape"])
            else:
                tensors[name] = f.get_tensor(name)
    return tensors


def write_safetensors(path, tensors, metadata=None):
    """Write {name: ndarray} atomically (temp file + rename) with ``safetensors.numpy``."""
    try:
        from safetensors.numpy import save
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("writing .safetensors needs the 'safetensors' package: "
                          "pip install 'npformer[hf]'") from error
    arrays = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    return atomic_write(path, lambda f: f.write(save(arrays, metadata=metadata)))


def load_checkpoint(directory):
    """(config dict, {name: ndarray}) from a Hugging Face checkpoint directory.

    Reads ``config.json`` and ``model.safetensors``, or the shards listed in
    ``model.safetensors.index.json``. An unsupported ``model_type`` is refused
    before any tensor is read.
    """
    directory = Path(directory)
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise ValueError(f"directory: expected a Hugging Face checkpoint with config.json, "
                         f"found none in {str(directory)!r}")
    config = json.loads(config_path.read_text())
    family_of(config)
    single, index = directory / "model.safetensors", directory / "model.safetensors.index.json"
    if single.is_file():
        return config, read_safetensors(single)
    if index.is_file():
        state = {}
        for shard in sorted(set(json.loads(index.read_text())["weight_map"].values())):
            state.update(read_safetensors(directory / shard))
        return config, state
    found = sorted(p.name for p in directory.iterdir())
    raise ValueError(f"directory: expected model.safetensors (or model.safetensors.index.json) "
                     f"in {str(directory)!r}, found {found}")


def to_numpy(value):
    """A torch tensor (any dtype, bf16 included) or array-like -> ndarray, without importing torch."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        return value.numpy()
    return np.asarray(value)


# -- configs ----------------------------------------------------------------------------
def _hf_dict(config):
    """A config given as a dict, a transformers config object or a path to config.json."""
    if isinstance(config, (str, os.PathLike)):
        return json.loads(Path(config).read_text())
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
    raise ValueError(f"config.json: {key}={value!r} cannot be expressed by npformer ({why})")


def _rope_theta(hf):
    """RoPE base and a check that the scaling is the plain one (transformers 4 and 5 spellings)."""
    rope = hf.get("rope_parameters") or {}
    scaling = hf.get("rope_scaling") or {}
    kind = rope.get("rope_type", scaling.get("rope_type", scaling.get("type", "default")))
    if kind not in ("default", None):
        _refuse("rope_type", kind, "only plain RoPE is implemented, no frequency scaling")
    return float(rope.get("rope_theta", hf.get("rope_theta", 10000.0)))


_GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu",
                     "relu": "relu"}


def decoder_config_from_hf(hf):
    """A ``DecoderConfig`` equal to a GPT-2, Llama or Mixtral config dict; ValueError naming
    the key of any setting npformer cannot express."""
    hf = _hf_dict(hf)
    family = family_of(hf)
    if family == "gpt2":
        act = hf.get("activation_function", "gelu_new")
        if act not in _GPT2_ACTIVATIONS:
            _refuse("activation_function", act, f"supported: {sorted(_GPT2_ACTIVATIONS)}")
        if not hf.get("scale_attn_weights", True):
            _refuse("scale_attn_weights", False, "attention always scales by 1/sqrt(D)")
        if hf.get("scale_attn_by_inverse_layer_idx", False):
            _refuse("scale_attn_by_inverse_layer_idx", True, "attention always scales by 1/sqrt(D)")
        if hf.get("add_cross_attention", False):
            _refuse("add_cross_attention", True, "a decoder-only model has no cross-attention")
        d = hf["n_embd"]
        return DecoderConfig.gpt2(
            vocab_size=hf["vocab_size"], d_model=d, n_heads=hf["n_head"], n_layers=hf["n_layer"],
            max_len=hf["n_positions"], ffn=_GPT2_ACTIVATIONS[act],
            ffn_hidden=hf.get("n_inner") or 4 * d, norm_eps=hf.get("layer_norm_epsilon", 1e-5),
            tie_embeddings=hf.get("tie_word_embeddings", True),
            init_std=hf.get("initializer_range", 0.02))
    if family in ("llama", "mixtral"):
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
                      rope_theta=_rope_theta(hf), tie_embeddings=hf.get("tie_word_embeddings", False),
                      attn_bias=hf.get("attention_bias", False), ffn_bias=hf.get("mlp_bias", False),
                      window=hf.get("sliding_window"), init_std=hf.get("initializer_range", 0.02))
        if family == "mixtral":
            config.update(_moe_config_from_hf(hf))
        return DecoderConfig.llama(**config)
    raise ValueError(f"config.json: model_type {family!r} is an encoder; use encoder_config_from_hf")


def _moe_config_from_hf(hf):
    """Mixtral's MoE settings as DecoderConfig fields (see npformer.moe)."""
    if hf.get("router_jitter_noise", 0.0):
        _refuse("router_jitter_noise", hf["router_jitter_noise"], "the router is deterministic")
    return dict(n_experts=hf["num_local_experts"], top_k=hf["num_experts_per_tok"],
                moe_aux_weight=hf.get("router_aux_loss_coef", 0.001))


def hf_config_from_decoder(config, dtype=np.float32):
    """A GPT-2, Llama or Mixtral config dict for transformers equal to a ``DecoderConfig``.

    ValueError naming the first field that none of them can express.
    """
    c = config
    kv = c.n_kv_heads or c.n_heads
    common = dict(vocab_size=c.vocab_size, tie_word_embeddings=c.tie_embeddings,
                  initializer_range=c.init_std, dtype=np.dtype(dtype).name,
                  bos_token_id=None, eos_token_id=None, pad_token_id=None, use_cache=True)
    for name, wanted in (("prenorm", True), ("causal", True), ("window", None)):
        if getattr(c, name) != wanted:
            raise ValueError(f"config: {name}={getattr(c, name)!r} cannot be exported to GPT-2 or "
                             f"Llama (they need {name}={wanted!r})")
    if c.positions == "learned":
        checks = (("norm", "layernorm"), ("attn_bias", True), ("ffn_bias", True),
                  ("n_kv_heads", c.n_heads), ("n_experts", 0))
        for name, wanted in checks:
            value = kv if name == "n_kv_heads" else getattr(c, name)
            if value != wanted:
                raise ValueError(f"config: {name}={value!r} cannot be exported as GPT-2 "
                                 f"(learned positions) which needs {name}={wanted!r}")
        act = {v: k for k, v in _GPT2_ACTIVATIONS.items() if k != "gelu_pytorch_tanh"}.get(c.ffn)
        if act is None:
            raise ValueError(f"config: ffn={c.ffn!r} cannot be exported as GPT-2 "
                             f"(needs one of {sorted(set(_GPT2_ACTIVATIONS.values()))})")
        return dict(common, model_type="gpt2", architectures=["GPT2LMHeadModel"],
                    n_embd=c.d_model, n_head=c.n_heads, n_layer=c.n_layers, n_positions=c.max_len,
                    n_inner=c.ffn_hidden or 4 * c.d_model, activation_function=act,
                    layer_norm_epsilon=c.norm_eps, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    if c.positions == "rope":
        checks = (("norm", "rmsnorm"), ("ffn", "swiglu"), ("rope_layout", "half"), ("rope_fraction", 1.0))
        for name, wanted in checks:
            if getattr(c, name) != wanted:
                raise ValueError(f"config: {name}={getattr(c, name)!r} cannot be exported as Llama "
                                 f"(RoPE) which needs {name}={wanted!r}")
        llama = dict(common, hidden_size=c.d_model, num_attention_heads=c.n_heads,
                     num_key_value_heads=kv, head_dim=c.head_dim, num_hidden_layers=c.n_layers,
                     intermediate_size=c.ffn_hidden or 4 * c.d_model, hidden_act="silu",
                     max_position_embeddings=c.max_len, rms_norm_eps=c.norm_eps,
                     rope_theta=c.rope_theta,
                     rope_parameters={"rope_type": "default", "rope_theta": c.rope_theta},
                     attention_dropout=0.0)
        if not c.n_experts:
            return dict(llama, model_type="llama", architectures=["LlamaForCausalLM"],
                        attention_bias=c.attn_bias, mlp_bias=c.ffn_bias)
        for name in ("attn_bias", "ffn_bias"):
            if getattr(c, name):
                raise ValueError(f"config: {name}=True cannot be exported as Mixtral (no biases)")
        return dict(llama, model_type="mixtral", architectures=["MixtralForCausalLM"],
                    num_local_experts=c.n_experts, num_experts_per_tok=c.top_k,
                    router_aux_loss_coef=c.moe_aux_weight, router_jitter_noise=0.0,
                    sliding_window=None, output_router_logits=False)
    raise ValueError(f"config: positions={c.positions!r} cannot be exported (GPT-2 needs 'learned', "
                     f"Llama needs 'rope')")


# -- name and layout tables ----------------------------------------------------------------
@dataclass(frozen=True)
class ParamMap:
    """Some npformer parameters and the Hugging Face tensors they are made of.

    Usually one of each; Q, K, V fuse three of theirs into one of ours, and a
    fused expert tensor [E, ...] splits into E of ours.
    ``to_ours(list of their arrays) -> list of ours``; ``to_theirs`` the inverse.
    """

    ours: tuple
    theirs: tuple
    to_ours: Callable
    to_theirs: Callable


def _same(ours, theirs):
    """Same layout (norm gains, biases, embeddings, GPT-2 Conv1D weights)."""
    return ParamMap((ours,), (theirs,), lambda a: a, lambda w: w)


def _linear(ours, theirs):
    """nn.Linear weight [d_out, d_in] <-> ours [d_in, d_out]."""
    return ParamMap((ours,), (theirs,), lambda a: [a[0].T], lambda w: [w[0].T])


def _fused(ours, theirs, widths, transpose):
    """Several of their projections side by side in our columns: [Q | K | V]."""
    cuts = np.cumsum(widths)[:-1]
    if transpose:     # weights: their [d_out_i, d_in] each -> our [d_in, sum d_out_i]
        return ParamMap((ours,), tuple(theirs),
                        lambda a: [np.concatenate([x.T for x in a], axis=-1)],
                        lambda w: [x.T for x in np.split(w[0], cuts, axis=-1)])
    return ParamMap((ours,), tuple(theirs), lambda a: [np.concatenate(a, axis=-1)],
                    lambda w: np.split(w[0], cuts, axis=-1))


def _stacked(ours, theirs, transpose):
    """One of their tensors [E, d_out, d_in] holding E experts <-> E of ours [d_in, d_out]."""
    return ParamMap(tuple(ours), (theirs,), lambda a: [x.T if transpose else x for x in a[0]],
                    lambda w: [np.stack([x.T if transpose else x for x in w])])


def _gpt2_table(c):
    table = [_same("tokens.weight", "transformer.wte.weight"),
             _same("positions.weight", "transformer.wpe.weight")]
    for i in range(c.n_layers):
        ours, theirs = f"blocks.{i}.", f"transformer.h.{i}."
        for a, b in (("norm1.gamma", "ln_1.weight"), ("norm1.beta", "ln_1.bias"),
                     ("attn.qkv.weight", "attn.c_attn.weight"), ("attn.qkv.bias", "attn.c_attn.bias"),
                     ("attn.out.weight", "attn.c_proj.weight"), ("attn.out.bias", "attn.c_proj.bias"),
                     ("norm2.gamma", "ln_2.weight"), ("norm2.beta", "ln_2.bias"),
                     ("ffn.up.weight", "mlp.c_fc.weight"), ("ffn.up.bias", "mlp.c_fc.bias"),
                     ("ffn.down.weight", "mlp.c_proj.weight"), ("ffn.down.bias", "mlp.c_proj.bias")):
            table.append(_same(ours + a, theirs + b))      # Conv1D: already [in, out]
    table += [_same("norm.gamma", "transformer.ln_f.weight"), _same("norm.beta", "transformer.ln_f.bias")]
    if not c.tie_embeddings:
        table.append(_linear("head.weight", "lm_head.weight"))
    return table


def _attention(ours, theirs, H, kv, D, bias):
    """Separate q/k/v projections (Llama, BERT) <-> our fused qkv [Q | K | V]; theirs: {part: name}."""
    widths = [H * D, kv * D, kv * D]
    names = [theirs[p] for p in "qkv"]
    table = [_fused(ours + "attn.qkv.weight", [n + ".weight" for n in names], widths, True),
             _linear(ours + "attn.out.weight", theirs["o"] + ".weight")]
    if bias:
        table += [_fused(ours + "attn.qkv.bias", [n + ".bias" for n in names], widths, False),
                  _same(ours + "attn.out.bias", theirs["o"] + ".bias")]
    return table


def _llama_table(c, experts=None):
    """Llama; with ``experts`` "fused" (transformers 5) or "per_expert" (the hub's Mixtral files)."""
    kv = c.n_kv_heads or c.n_heads
    table = [_same("tokens.weight", "model.embed_tokens.weight")]
    for i in range(c.n_layers):
        ours, theirs = f"blocks.{i}.", f"model.layers.{i}."
        projections = {p: f"{theirs}self_attn.{p}_proj" for p in "qkvo"}
        table += _attention(ours, projections, c.n_heads, kv, c.head_dim, c.attn_bias)
        table += [_same(ours + "norm1.gamma", theirs + "input_layernorm.weight"),
                  _same(ours + "norm2.gamma", theirs + "post_attention_layernorm.weight")]
        if experts is None:
            for part in ("gate", "up", "down"):
                table.append(_linear(f"{ours}ffn.{part}.weight", f"{theirs}mlp.{part}_proj.weight"))
                if c.ffn_bias:
                    table.append(_same(f"{ours}ffn.{part}.bias", f"{theirs}mlp.{part}_proj.bias"))
        else:
            table += _moe_table(c, ours + "ffn.", theirs, experts)
    table.append(_same("norm.gamma", "model.norm.weight"))
    if not c.tie_embeddings:
        table.append(_linear("head.weight", "lm_head.weight"))
    return table


def _moe_table(c, ours, theirs, experts):
    E = c.n_experts
    each = [f"{ours}experts.{e}." for e in range(E)]
    if experts == "per_expert":      # block_sparse_moe.experts.{e}.w1 (gate), w3 (up), w2 (down)
        moe = theirs + "block_sparse_moe."
        table = [_linear(ours + "router.weight", moe + "gate.weight")]
        for e in range(E):
            for part, w in (("gate", "w1"), ("up", "w3"), ("down", "w2")):
                table.append(_linear(f"{each[e]}{part}.weight", f"{moe}experts.{e}.{w}.weight"))
        return table
    moe = theirs + "mlp."            # transformers 5: experts.gate_up_proj [E, 2I, d], down_proj [E, d, I]
    gate_up = ParamMap(tuple(f"{x}{p}.weight" for p in ("gate", "up") for x in each),
                       (moe + "experts.gate_up_proj",),
                       lambda a: [x.T for half in np.split(a[0], 2, axis=1) for x in half],
                       lambda w: [np.stack([np.concatenate([g.T, u.T]) for g, u in zip(w[:E], w[E:])])])
    return [_linear(ours + "router.weight", moe + "gate.weight"), gate_up,
            _stacked([x + "down.weight" for x in each], moe + "experts.down_proj", True)]


def _decoder_table(config, experts="fused"):
    """The table of a DecoderConfig: GPT-2 (learned positions) or Llama / Mixtral (RoPE)."""
    if config.positions == "learned":
        return _gpt2_table(config)
    return _llama_table(config, experts if config.n_experts else None)


def _bert_table(c):
    table = [_same("tokens.weight", "embeddings.word_embeddings.weight"),
             _same("positions.weight", "embeddings.position_embeddings.weight"),
             _same("segments.weight", "embeddings.token_type_embeddings.weight"),
             _same("embed_norm.gamma", "embeddings.LayerNorm.weight"),
             _same("embed_norm.beta", "embeddings.LayerNorm.bias")]
    for i in range(c.n_layers):
        ours, theirs = f"blocks.{i}.", f"encoder.layer.{i}."
        projections = {p: f"{theirs}attention.self.{name}" for p, name in
                       (("q", "query"), ("k", "key"), ("v", "value"))}
        projections["o"] = theirs + "attention.output.dense"
        table += _attention(ours, projections, c.n_heads, c.n_heads, c.d_model // c.n_heads, True)
        table += [_same(ours + "norm1.gamma", theirs + "attention.output.LayerNorm.weight"),
                  _same(ours + "norm1.beta", theirs + "attention.output.LayerNorm.bias"),
                  _linear(ours + "ffn.up.weight", theirs + "intermediate.dense.weight"),
                  _same(ours + "ffn.up.bias", theirs + "intermediate.dense.bias"),
                  _linear(ours + "ffn.down.weight", theirs + "output.dense.weight"),
                  _same(ours + "ffn.down.bias", theirs + "output.dense.bias"),
                  _same(ours + "norm2.gamma", theirs + "output.LayerNorm.weight"),
                  _same(ours + "norm2.beta", theirs + "output.LayerNorm.bias")]
    return table


def _bart_table(c):
    """BART: encoder.* and the decoder; learned positions keep HF's 2 unused leading rows."""
    def positions(ours, theirs):      # HF's table has 2 extra rows in front (offset 2)
        return ParamMap((ours,), (theirs,), lambda a: [a[0][2:]],
                        lambda w: [np.concatenate([np.zeros_like(w[0][:2]), w[0]])])

    def layer_norm(ours, theirs):
        return [_same(ours + ".gamma", theirs + ".weight"), _same(ours + ".beta", theirs + ".bias")]

    def linear(ours, theirs):
        return [_linear(ours + ".weight", theirs + ".weight"), _same(ours + ".bias", theirs + ".bias")]

    D, H = c.d_model // c.n_heads, c.n_heads
    table = [_same("encoder.tokens.weight", "model.shared.weight"),
             ParamMap(("logits_bias",), ("final_logits_bias",), lambda a: [a[0][0]], lambda w: [w[0][None]])]
    for side, layers in (("encoder", c.n_encoder_layers), ("decoder", c.n_decoder_layers)):
        ours_side = "encoder." if side == "encoder" else ""
        theirs_side = f"model.{side}."
        table.append(positions(ours_side + "positions.weight", theirs_side + "embed_positions.weight"))
        table += layer_norm(ours_side + "embed_norm", theirs_side + "layernorm_embedding")
        for i in range(layers):
            ours, theirs = f"{ours_side}blocks.{i}.", f"{theirs_side}layers.{i}."
            projections = {p: f"{theirs}self_attn.{p}_proj" for p in "qkv"}
            projections["o"] = theirs + "self_attn.out_proj"
            table += _attention(ours, projections, H, H, D, True)
            table += layer_norm(ours + "norm1", theirs + "self_attn_layer_norm")
            if side == "decoder":
                cross = theirs + "encoder_attn."
                table += linear(ours + "cross_attn.q", cross + "q_proj")
                table.append(_fused(ours + "cross_attn.kv.weight", [cross + "k_proj.weight",
                                    cross + "v_proj.weight"], [H * D, H * D], True))
                table.append(_fused(ours + "cross_attn.kv.bias", [cross + "k_proj.bias",
                                    cross + "v_proj.bias"], [H * D, H * D], False))
                table += linear(ours + "cross_attn.out", cross + "out_proj")
                table += layer_norm(ours + "cross_norm", theirs + "encoder_attn_layer_norm")
            table += linear(ours + "ffn.up", theirs + "fc1") + linear(ours + "ffn.down", theirs + "fc2")
            table += layer_norm(ours + "norm2", theirs + "final_layer_norm")
    return table


def _canonical(family, key):
    """Accept checkpoints saved from the base model (no 'transformer.' / 'model.' prefix)."""
    if family == "gpt2" and not key.startswith(("transformer.", "lm_head.")):
        return "transformer." + key
    if family in ("llama", "mixtral") and not key.startswith(("model.", "lm_head.")):
        return "model." + key
    if family == "bert" and key.startswith("bert."):
        return key[len("bert."):]
    return key


def convert_state_dict(state, table, family, expected_shapes, skip=(), strict=True):
    """{their name: tensor} -> {our name: ndarray} through ``table``; every problem names its key.

    ``expected_shapes`` {our name: shape}; ``skip`` their names allowed but not used;
    ``strict=False`` ignores unexpected keys (missing ones are always an error).
    """
    state = {_canonical(family, k): v for k, v in state.items() if not _BUFFERS.search(k)}
    wanted = {name for entry in table for name in entry.theirs}
    missing = sorted(wanted - set(state))
    unexpected = sorted(set(state) - wanted - set(skip)) if strict else []
    if missing or unexpected:
        raise ValueError(f"{family} checkpoint: missing keys {missing[:8]}"
                         f"{' ...' if len(missing) > 8 else ''} ({len(missing)}), unexpected keys "
                         f"{unexpected[:8]}{' ...' if len(unexpected) > 8 else ''} ({len(unexpected)})")
    ours = {}
    for entry in table:
        zeros = [np.zeros(expected_shapes[name], np.float32) for name in entry.ours]
        for name, shape in zip(entry.theirs, (a.shape for a in entry.to_theirs(zeros))):
            array = to_numpy(state[name])
            if tuple(array.shape) != tuple(shape):
                raise ValueError(f"{family} checkpoint: {name!r} expected shape {tuple(shape)}, "
                                 f"got {tuple(array.shape)}")
            if not np.issubdtype(array.dtype, np.floating):
                raise TypeError(f"{family} checkpoint: {name!r} expected a float tensor, "
                                f"got {array.dtype}")
        ours.update(zip(entry.ours, entry.to_ours([to_numpy(state[n]) for n in entry.theirs])))
    return ours


# -- public entry points --------------------------------------------------------------------
def _source(source, config):
    """(HF config dict, their state dict) from a directory, or a state dict plus its config."""
    if isinstance(source, (str, os.PathLike)):
        hf, state = load_checkpoint(source)
        return (hf if config is None else _hf_dict(config)), state
    if isinstance(source, dict):
        if config is None:
            raise ValueError("config: a state dict needs its config (dict, transformers config "
                             "or path to config.json), got None")
        return _hf_dict(config), source
    raise TypeError(f"source: expected a checkpoint directory or a state dict, "
                    f"got {type(source).__name__}")


def _plan(hf, state_keys=()):
    """(family, our config, model class, table, their names to skip) for a HF config."""
    family = family_of(hf)
    if family == "bert":
        from .encoder import Encoder
        ours = encoder_config_from_hf(hf)
        return family, ours, Encoder, _bert_table(ours), {"pooler.dense.weight", "pooler.dense.bias"}
    if family == "bart":
        from .seq2seq import EncoderDecoder
        ours = seq2seq_config_from_hf(hf)
        aliases = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                   "lm_head.weight"}                      # all tied to model.shared.weight
        return family, ours, EncoderDecoder, _bart_table(ours), aliases
    ours = decoder_config_from_hf(hf)
    experts = "per_expert" if any("block_sparse_moe." in k for k in state_keys) else "fused"
    skip = {"lm_head.weight"} if ours.tie_embeddings else set()   # a tied head saved anyway
    return family, ours, DecoderLM, _decoder_table(ours, experts), skip


def from_hf(source, config=None, dtype=np.float32, strict=True):
    """A Hugging Face checkpoint as an npformer model (weights copied, layouts converted).

    ``source``: a checkpoint directory (config.json + model.safetensors), or a
    state dict {name: torch tensor or ndarray} together with ``config`` (a dict,
    a transformers config or a path to config.json). GPT-2, Llama and Mixtral
    give a ``DecoderLM``; BERT gives an ``Encoder`` (its pooler, unused by the
    token states, is skipped). ``strict=False`` ignores unexpected tensors
    (e.g. the masked-LM head of a BertForPreTraining checkpoint).
    """
    hf, state = _source(source, config)
    family, ours, model_class, table, skip = _plan(hf, state.keys())
    model = model_class(ours, np.random.default_rng(0), dtype)
    shapes = {name: p.shape for name, p in model.named_parameters()}
    model.load_state_dict(convert_state_dict(state, table, family, shapes, skip, strict))
    return model


def hf_grads_as_ours(grads, config):
    """Their gradients {their name: tensor} renamed and re-laid-out as ours {our name: ndarray}.

    The same mapping as ``from_hf``, for comparing backward passes parameter by parameter.
    """
    hf = _hf_dict(config)
    family, ours, model_class, table, skip = _plan(hf, grads.keys())
    shapes = {name: p.shape for name, p in
              model_class(ours, np.random.default_rng(0), np.float32).named_parameters()}
    return convert_state_dict(grads, table, family, shapes, skip, strict=False)


def hf_state_dict(model, grads=False, experts="per_expert"):
    """{Hugging Face name: ndarray} of a ``DecoderLM``, ``Encoder`` (BERT) or ``EncoderDecoder``
    (BART); their ``.grad`` with ``grads=True``.

    MoE experts are written ``"per_expert"`` (block_sparse_moe.experts.{e}.w1/w2/w3,
    the hub's Mixtral files, which transformers 4 and 5 both load) or ``"fused"``
    (transformers 5's in-memory layout).
    """
    from .encoder import Encoder
    from .seq2seq import EncoderDecoder
    if isinstance(model, DecoderLM):
        table = _decoder_table(model.config, experts)
    elif isinstance(model, Encoder):
        table = _bert_table(model.config)
    elif isinstance(model, EncoderDecoder):
        table = _bart_table(model.config)
    else:
        raise TypeError(f"model: expected a DecoderLM, Encoder or EncoderDecoder, "
                        f"got {type(model).__name__}")
    params = dict(model.named_parameters())
    out = {}
    for entry in table:
        arrays = [params[name].grad if grads else params[name].data for name in entry.ours]
        for name, part in zip(entry.theirs, entry.to_theirs(arrays)):
            out[name] = np.ascontiguousarray(part)
    return out


def save_hf(model, directory):
    """Write a ``DecoderLM`` as a transformers checkpoint: config.json + model.safetensors.

    GPT-2 when positions are learned, Llama when they are RoPE, Mixtral when the
    FFN is a Mixture of Experts; ValueError naming the config field if none of
    them can express the model. Returns the directory.
    """
    if not isinstance(model, DecoderLM):
        raise TypeError(f"model: expected a DecoderLM, got {type(model).__name__}")
    hf = hf_config_from_decoder(model.config, model.dtype)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_safetensors(directory / "model.safetensors", hf_state_dict(model), metadata={"format": "pt"})
    write_json(directory / "config.json", hf, indent=2)
    return directory


# -- encoders (BERT) --------------------------------------------------------------------------
_BERT_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                     "relu": "relu"}


def encoder_config_from_hf(hf):
    """An ``EncoderConfig`` equal to a BERT config dict; ValueError naming any key npformer
    cannot express."""
    from .encoder import EncoderConfig
    hf = _hf_dict(hf)
    if family_of(hf) != "bert":
        raise ValueError(f"config.json: model_type {hf.get('model_type')!r} is not an encoder "
                         f"npformer imports (expected 'bert')")
    act = hf.get("hidden_act", "gelu")
    if act not in _BERT_ACTIVATIONS:
        _refuse("hidden_act", act, f"supported: {sorted(_BERT_ACTIVATIONS)}")
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
        type_vocab_size=hf.get("type_vocab_size", 2), ffn=_BERT_ACTIVATIONS[act],
        ffn_hidden=hf["intermediate_size"], norm_eps=hf.get("layer_norm_eps", 1e-12),
        init_std=hf.get("initializer_range", 0.02))


# -- encoder-decoders (BART) -------------------------------------------------------------------
def seq2seq_config_from_hf(hf):
    """A ``Seq2SeqConfig`` equal to a BART config dict; ValueError naming any key npformer
    cannot express."""
    import math

    from .seq2seq import Seq2SeqConfig
    hf = _hf_dict(hf)
    if family_of(hf) != "bart":
        raise ValueError(f"config.json: model_type {hf.get('model_type')!r} is not an "
                         f"encoder-decoder npformer imports (expected 'bart')")
    act = hf.get("activation_function", "gelu")
    if act not in _BERT_ACTIVATIONS:
        _refuse("activation_function", act, f"supported: {sorted(_BERT_ACTIVATIONS)}")
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
        max_len=hf["max_position_embeddings"], ffn=_BERT_ACTIVATIONS[act],
        ffn_hidden=hf["encoder_ffn_dim"], norm_eps=1e-5,
        embed_scale=math.sqrt(d) if hf.get("scale_embedding", False) else 1.0,
        init_std=hf.get("init_std", 0.02))
