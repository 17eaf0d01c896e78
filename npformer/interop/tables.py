"""Which Hugging Face tensor becomes which npformer parameter, and how its layout changes.

Each family has one function below listing its rows block by block, our name
first, theirs second; for example Llama's

    blocks.{i}.attn.qkv.weight  <-  model.layers.{i}.self_attn.{q,k,v}_proj.weight

A row (``ParamMap``) names our parameter(s), their tensor(s) and the conversion
each way. The conversions, or layouts:

    same        copied as is: embeddings, norm gains, biases, and GPT-2's Conv1D
                weights, which are [d_in, d_out] like ours
    transposed  PyTorch's nn.Linear stores W as [d_out, d_in]; ours is [d_in, d_out]
    fused       our attention has one ``qkv`` Linear with columns [Q | K | V] =
                [H*D | H_kv*D | H_kv*D]: their three projections, side by side
                (BART's cross-attention fuses [K | V] the same way)
    stacked     transformers 5 keeps the E experts of a layer in one tensor
                [E, ...]; ours are E separate Linears

Some tensors in their checkpoints are not parameters (mask and RoPE buffers,
recomputed) and are skipped; checkpoints saved from the base model, without the
``transformer.`` or ``model.`` prefix, are accepted.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..t15_encoder import EncoderConfig
from ..t10_model import DecoderConfig
from ..t17_seq2seq import Seq2SeqConfig


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


# -- layouts -------------------------------------------------------------------------------------
def _same(ours, theirs):
    """Same layout (embeddings, norm gains, biases, GPT-2 Conv1D weights)."""
    return ParamMap((ours,), (theirs,), lambda a: a, lambda w: w)


def _transposed(ours, theirs):
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


# -- groups of rows the families share ------------------------------------------------------------
def _linear(ours, theirs, bias=True):
    """An nn.Linear: ``ours.weight`` <- ``theirs.weight`` transposed, ``ours.bias`` <- ``theirs.bias``."""
    weight = _transposed(ours + ".weight", theirs + ".weight")
    return [weight, _same(ours + ".bias", theirs + ".bias")] if bias else [weight]


def _fused_linear(ours, theirs, widths, bias=True):
    """Their separate Linears ``theirs`` as one of ours, side by side in that order."""
    table = [_fused(ours + ".weight", [name + ".weight" for name in theirs], widths, True)]
    if bias:
        table.append(_fused(ours + ".bias", [name + ".bias" for name in theirs], widths, False))
    return table


def _layer_norm(ours, theirs):
    """A LayerNorm: ``ours.gamma`` <- ``theirs.weight``, ``ours.beta`` <- ``theirs.bias``."""
    return [_same(ours + ".gamma", theirs + ".weight"), _same(ours + ".beta", theirs + ".bias")]


def _qkv_widths(c):
    """Column widths of our fused qkv Linear: [H*D, H_kv*D, H_kv*D]."""
    D = c.d_model // c.n_heads
    kv = c.n_kv_heads or c.n_heads
    return [c.n_heads * D, kv * D, kv * D]


def _attention(ours, q, k, v, out, widths, bias):
    """Self-attention with separate q, k, v, out projections <-> our ``qkv`` and ``out``."""
    return _fused_linear(ours + "qkv", (q, k, v), widths, bias) + _linear(ours + "out", out, bias)


def _untied_head(c):
    """The output projection ``lm_head.weight`` unless the head reads the token table."""
    return [] if c.tie_embeddings else [_transposed("head.weight", "lm_head.weight")]


# -- one table per family ------------------------------------------------------------------------
def gpt2_table(c):
    """GPT-2 (GPT2LMHeadModel): every tensor copied as is (Conv1D stores [d_in, d_out], and
    c_attn already holds [Q | K | V])."""
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
            table.append(_same(ours + a, theirs + b))
    table += _layer_norm("norm", "transformer.ln_f")
    return table + _untied_head(c)


def llama_table(c, experts=None):
    """Llama (LlamaForCausalLM); Mixtral (MixtralForCausalLM) when ``experts`` names the layout
    of its expert tensors: "per_expert" (the hub's files) or "fused" (transformers 5)."""
    widths = _qkv_widths(c)
    table = [_same("tokens.weight", "model.embed_tokens.weight")]
    for i in range(c.n_layers):
        ours, theirs = f"blocks.{i}.", f"model.layers.{i}."
        attn = theirs + "self_attn."
        table += _attention(ours + "attn.", attn + "q_proj", attn + "k_proj", attn + "v_proj",
                            attn + "o_proj", widths, c.attn_bias)
        table += [_same(ours + "norm1.gamma", theirs + "input_layernorm.weight"),
                  _same(ours + "norm2.gamma", theirs + "post_attention_layernorm.weight")]
        if experts is None:
            for part in ("gate", "up", "down"):
                table += _linear(f"{ours}ffn.{part}", f"{theirs}mlp.{part}_proj", c.ffn_bias)
        else:
            table += _mixtral_experts(c.n_experts, ours + "ffn.", theirs, experts)
    table.append(_same("norm.gamma", "model.norm.weight"))
    return table + _untied_head(c)


def _mixtral_experts(E, ours, theirs, experts):
    """A Mixtral MoE layer: the router and E SwiGLU experts (gate, up, down), in either layout."""
    each = [f"{ours}experts.{e}." for e in range(E)]
    if experts == "per_expert":      # block_sparse_moe.experts.{e}.w1 (gate), w3 (up), w2 (down)
        moe = theirs + "block_sparse_moe."
        table = [_transposed(ours + "router.weight", moe + "gate.weight")]
        for e in range(E):
            for part, w in (("gate", "w1"), ("up", "w3"), ("down", "w2")):
                table.append(_transposed(f"{each[e]}{part}.weight", f"{moe}experts.{e}.{w}.weight"))
        return table
    moe = theirs + "mlp."            # experts.gate_up_proj [E, 2I, d] and down_proj [E, d, I]
    gate_up = ParamMap(tuple(f"{x}{p}.weight" for p in ("gate", "up") for x in each),
                       (moe + "experts.gate_up_proj",),
                       lambda a: [x.T for half in np.split(a[0], 2, axis=1) for x in half],
                       lambda w: [np.stack([np.concatenate([g.T, u.T]) for g, u in zip(w[:E], w[E:])])])
    return [_transposed(ours + "router.weight", moe + "gate.weight"), gate_up,
            _stacked([x + "down.weight" for x in each], moe + "experts.down_proj", True)]


def bert_table(c):
    """BERT (BertModel): embeddings with segments and a LayerNorm, Post-Norm blocks, biases,
    and the pooler (``pooler.dense``) when the config has one."""
    widths = _qkv_widths(c)
    table = [_same("tokens.weight", "embeddings.word_embeddings.weight"),
             _same("positions.weight", "embeddings.position_embeddings.weight"),
             _same("segments.weight", "embeddings.token_type_embeddings.weight"),
             *_layer_norm("embed_norm", "embeddings.LayerNorm")]
    for i in range(c.n_layers):
        ours, theirs = f"blocks.{i}.", f"encoder.layer.{i}."
        attn = theirs + "attention."
        table += _attention(ours + "attn.", attn + "self.query", attn + "self.key",
                            attn + "self.value", attn + "output.dense", widths, True)
        table += _layer_norm(ours + "norm1", attn + "output.LayerNorm")
        table += _linear(ours + "ffn.up", theirs + "intermediate.dense")
        table += _linear(ours + "ffn.down", theirs + "output.dense")
        table += _layer_norm(ours + "norm2", theirs + "output.LayerNorm")
    return table + (_linear("pooler", "pooler.dense") if c.pooler else [])


def bart_table(c):
    """BART (BartForConditionalGeneration): one token table for encoder, decoder and head,
    a logits bias, and per side learned positions and Post-Norm blocks. Our decoder's
    parameters have no prefix, the encoder's start with ``encoder.``."""
    logits_bias = ParamMap(("logits_bias",), ("final_logits_bias",),      # theirs [1, V]
                           lambda a: [a[0][0]], lambda w: [w[0][None]])
    return ([_same("encoder.tokens.weight", "model.shared.weight"), logits_bias]
            + _bart_side(c, "encoder.", "model.encoder.", c.n_encoder_layers, cross=False)
            + _bart_side(c, "", "model.decoder.", c.n_decoder_layers, cross=True))


def _bart_side(c, ours_side, theirs_side, n_layers, cross):
    """The positions, embedding norm and blocks of BART's encoder or (``cross``) decoder."""
    widths = _qkv_widths(c)
    positions = ParamMap((ours_side + "positions.weight",), (theirs_side + "embed_positions.weight",),
                         lambda a: [a[0][2:]],        # theirs has 2 unused rows in front (offset 2)
                         lambda w: [np.concatenate([np.zeros_like(w[0][:2]), w[0]])])
    table = [positions, *_layer_norm(ours_side + "embed_norm", theirs_side + "layernorm_embedding")]
    for i in range(n_layers):
        ours, theirs = f"{ours_side}blocks.{i}.", f"{theirs_side}layers.{i}."
        attn, cross_attn = theirs + "self_attn.", theirs + "encoder_attn."
        table += _attention(ours + "attn.", attn + "q_proj", attn + "k_proj", attn + "v_proj",
                            attn + "out_proj", widths, True)
        table += _layer_norm(ours + "norm1", theirs + "self_attn_layer_norm")
        if cross:     # ours: cross_attn.q, cross_attn.kv with columns [K | V], cross_attn.out
            table += _linear(ours + "cross_attn.q", cross_attn + "q_proj")
            table += _fused_linear(ours + "cross_attn.kv", (cross_attn + "k_proj",
                                                            cross_attn + "v_proj"), widths[1:])
            table += _linear(ours + "cross_attn.out", cross_attn + "out_proj")
            table += _layer_norm(ours + "cross_norm", theirs + "encoder_attn_layer_norm")
        table += _linear(ours + "ffn.up", theirs + "fc1") + _linear(ours + "ffn.down", theirs + "fc2")
        table += _layer_norm(ours + "norm2", theirs + "final_layer_norm")
    return table


def decoder_table(config, experts="fused"):
    """The table of a DecoderConfig: GPT-2 (learned positions) or Llama / Mixtral (RoPE)."""
    if config.positions == "learned":
        return gpt2_table(config)
    return llama_table(config, experts if config.n_experts else None)


def table_for(config, experts="fused"):
    """The table of an npformer config: DecoderConfig (GPT-2, Llama, Mixtral), EncoderConfig
    (BERT) or Seq2SeqConfig (BART). ``experts``: the layout of Mixtral's expert tensors."""
    if isinstance(config, DecoderConfig):
        return decoder_table(config, experts)
    if isinstance(config, EncoderConfig):
        return bert_table(config)
    if isinstance(config, Seq2SeqConfig):
        return bart_table(config)
    raise TypeError(f"config: expected a DecoderConfig, EncoderConfig or Seq2SeqConfig, "
                    f"got {type(config).__name__}")


# -- their names that are not in the tables -----------------------------------------------------
# Tensors some checkpoints carry that are not parameters (recomputed buffers): skipped.
BUFFERS = re.compile(r"(^|\.)(rotary_emb\.(inv_freq|original_inv_freq)|attn\.(bias|masked_bias)"
                     r"|embeddings\.position_ids|embeddings\.token_type_ids)$")


def canonical_name(family, name):
    """Their tensor name with the prefix of the tables: a checkpoint saved from the base model
    has no ``transformer.`` (GPT-2) or ``model.`` (Llama, Mixtral); BERT's task models add ``bert.``."""
    if family == "gpt2" and not name.startswith(("transformer.", "lm_head.")):
        return "transformer." + name
    if family in ("llama", "mixtral") and not name.startswith(("model.", "lm_head.")):
        return "model." + name
    if family == "bert" and name.startswith("bert."):
        return name[len("bert."):]
    return name


def unused_names(config):
    """Their tensors a checkpoint may hold that npformer does not read: a tied head saved
    anyway, BERT's pooler when the config has none, BART's copies of its shared token table."""
    if isinstance(config, EncoderConfig):
        return set() if config.pooler else {"pooler.dense.weight", "pooler.dense.bias"}
    if isinstance(config, Seq2SeqConfig):
        return {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                "lm_head.weight"}
    return {"lm_head.weight"} if config.tie_embeddings else set()
