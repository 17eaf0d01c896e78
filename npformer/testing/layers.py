"""npformer's layers made of layers (a MoE layer, the blocks, the decoder, the encoder-decoder's
decoder), as components whose weights are arguments.

Each is called ``forward(*inputs, *weights, **recipe)``: the layer's float inputs (or token
ids), then one array per parameter in ``named_parameters()`` order, then the recipe that
builds the layer (widths, heads, norm and FFN kinds...) and its call options (masks). It
builds npformer's module from the recipe, loads the weights, runs its forward; ``backward``
returns the inputs' gradients, then every parameter's. ``weight_names(component, recipe)``
gives the parameters' names and shapes, so a drawn example names each weight as the module
does ("blocks.0.attn.qkv.weight") and a report says which gradient is wrong. The classes are
looked up at each call, so a patched-in method (a learner's, a catalogued mistake) runs.
"""
from __future__ import annotations

import functools

import numpy as np

from .references import lookup

BLOCK_RECIPE = ("n_heads", "n_kv_heads", "norm", "ffn", "ffn_hidden", "ffn_bias", "attn_bias", "causal")


def _rng():
    return np.random.default_rng(0)


def _block_config(d, recipe, **fixed):
    keys = {k: recipe[k] for k in BLOCK_RECIPE if k in recipe}
    return lookup("t09_block.BlockConfig")(d_model=d, **keys, **fixed)


def build(component, d, recipe, dtype=np.float64):
    """npformer's module of ``component`` with width ``d`` as ``recipe`` describes it."""
    if component == "moe":
        return lookup("t14_moe.MoE")(d, recipe["n_experts"], recipe["top_k"], recipe["hidden"], "swiglu",
                                     False, recipe["aux_weight"], _rng(), dtype)
    if component in ("prenorm_block", "postnorm_block"):
        config = _block_config(d, recipe, prenorm=component == "prenorm_block")
        return lookup("t09_block.build_block")(config, _rng(), dtype)
    if component == "decoder_lm":
        config = lookup("t10_model.DecoderConfig")(
            d_model=d, **{k: v for k, v in recipe.items() if k not in ("key_mask",)})
        return lookup("t10_model.DecoderLM")(config, _rng(), dtype)
    if component in ("seq2seq_block", "seq2seq_decoder"):
        fields = {k: v for k, v in recipe.items() if k not in ("mask", "memory_mask", "src_mask", "tgt_mask")}
        if component == "seq2seq_block":
            fields.pop("causal", None)
            config = lookup("t17_seq2seq.Seq2SeqConfig")(d_model=d, vocab_size=2, **fields)
            return lookup("t17_seq2seq.build_decoder_block")(config, _rng(), dtype)
        config = lookup("t17_seq2seq.Seq2SeqConfig")(d_model=d, share_embeddings=False, **fields)
        return lookup("t17_seq2seq.EncoderDecoder")(config, _rng(), dtype)
    raise ValueError(f"component: expected a layer component, got {component!r}")


def _weighted(component, module):
    """(name, Parameter) of the weights the component takes: all of the module's, but for the
    decoder half of an encoder-decoder the encoder's own (which decoding never reads)."""
    named = list(module.named_parameters())
    if component == "seq2seq_decoder":
        named = [(n, p) for n, p in named if not n.startswith("encoder.")]
    return named


def weight_names(component, d, recipe):
    """[(name, shape)] of the weights ``component`` takes after its inputs, in order."""
    return _weight_names(component, d, tuple(sorted(recipe.items())))


@functools.lru_cache(maxsize=512)
def _weight_names(component, d, recipe):
    # a draw asks for the same few recipes again and again: build each one once
    return tuple((name, p.shape) for name, p in _weighted(component, build(component, d, dict(recipe))))


def _loaded(component, d, recipe, weights, dtype):
    module = build(component, d, recipe, dtype)
    named = _weighted(component, module)
    if len(weights) != len(named):
        raise TypeError(f"weights: expected {len(named)} arrays ({', '.join(n for n, _ in named)}), "
                        f"got {len(weights)}")
    for (name, p), w in zip(named, weights):
        if np.shape(w) != p.shape:
            raise ValueError(f"{name}: expected shape {p.shape}, got {np.shape(w)}")
        p.data[...] = w
    return module, [p for _, p in named]


def _grads(params):
    return tuple(p.grad for p in params)


# -- the MoE layer ----------------------------------------------------------------------------------
def moe_forward(x, *weights, n_experts=2, top_k=1, hidden=2, aux_weight=0.01, token_mask=None):
    """x [..., d] -> (MoE(x) [..., d], cache); SwiGLU experts, no biases; backward adds
    aux_weight times the load-balancing loss's gradient."""
    recipe = {"n_experts": n_experts, "top_k": top_k, "hidden": hidden, "aux_weight": aux_weight}
    layer, params = _loaded("moe", x.shape[-1], recipe, weights, x.dtype)
    out, cache = layer.forward(x, token_mask)
    return out, (layer, params, cache)


def moe_backward(d_out, cache):
    """-> (d_x, d_router, d_experts...)."""
    layer, params, inner = cache
    return (layer.backward(d_out, inner),) + _grads(params)


# -- the blocks -------------------------------------------------------------------------------------
def _block_forward(component, x, weights, recipe, mask):
    block, params = _loaded(component, x.shape[-1], recipe, weights, x.dtype)
    out, cache = block.forward(x, mask)
    return out, (block, params, cache)


def prenorm_block_forward(x, *weights, n_heads=1, n_kv_heads=None, norm="layernorm", ffn="gelu",
                          ffn_hidden=None, ffn_bias=True, attn_bias=False, causal=True, mask=None):
    """x [B, N, d] -> (x + Attn(Norm1(x)) then + FFN(Norm2(.)), cache)."""
    recipe = dict(n_heads=n_heads, n_kv_heads=n_kv_heads, norm=norm, ffn=ffn, ffn_hidden=ffn_hidden,
                  ffn_bias=ffn_bias, attn_bias=attn_bias, causal=causal)
    return _block_forward("prenorm_block", x, weights, recipe, mask)


def postnorm_block_forward(x, *weights, n_heads=1, n_kv_heads=None, norm="layernorm", ffn="gelu",
                           ffn_hidden=None, ffn_bias=True, attn_bias=False, causal=True, mask=None):
    """x [B, N, d] -> (Norm2(h + FFN(h)) with h = Norm1(x + Attn(x)), cache)."""
    recipe = dict(n_heads=n_heads, n_kv_heads=n_kv_heads, norm=norm, ffn=ffn, ffn_hidden=ffn_hidden,
                  ffn_bias=ffn_bias, attn_bias=attn_bias, causal=causal)
    return _block_forward("postnorm_block", x, weights, recipe, mask)


def block_backward(d_out, cache):
    """-> (d_x, d_weights...)."""
    block, params, inner = cache
    return (block.backward(d_out, inner),) + _grads(params)


# -- the decoder-only model -------------------------------------------------------------------------
def decoder_lm_forward(ids, *weights, vocab_size=5, max_len=4, n_heads=1, n_kv_heads=None, n_layers=1,
                       positions="learned", norm="layernorm", ffn="gelu", ffn_hidden=None, prenorm=True,
                       tie_embeddings=True, attn_bias=False, ffn_bias=True, key_mask=None):
    """ids [B, N] -> (logits [B, N, V], cache) of a DecoderLM (d from the token table)."""
    recipe = dict(vocab_size=vocab_size, max_len=max_len, n_heads=n_heads, n_kv_heads=n_kv_heads,
                  n_layers=n_layers, positions=positions, norm=norm, ffn=ffn, ffn_hidden=ffn_hidden,
                  prenorm=prenorm, tie_embeddings=tie_embeddings, attn_bias=attn_bias, ffn_bias=ffn_bias)
    table = weights[0]
    model, params = _loaded("decoder_lm", table.shape[-1], recipe, weights, table.dtype)
    out, cache = model.forward(ids, key_mask)
    return out, (model, params, cache)


def decoder_lm_backward(d_out, cache):
    """-> (None for the ids, d_weights...)."""
    model, params, inner = cache
    model.backward(d_out, inner)
    return (None,) + _grads(params)


# -- the encoder-decoder: one decoder layer, and the decoder half -----------------------------------
def seq2seq_block_forward(x, memory, *weights, n_heads=1, n_kv_heads=None, norm="layernorm", ffn="gelu",
                          ffn_hidden=None, prenorm=True, attn_bias=True, ffn_bias=True, mask=None,
                          memory_mask=None):
    """x [B, N, d], memory [B, M, d] -> (the decoder layer's output [B, N, d], cache)."""
    recipe = dict(n_heads=n_heads, n_kv_heads=n_kv_heads, norm=norm, ffn=ffn, ffn_hidden=ffn_hidden,
                  prenorm=prenorm, attn_bias=attn_bias, ffn_bias=ffn_bias)
    block, params = _loaded("seq2seq_block", x.shape[-1], recipe, weights, x.dtype)
    out, cache = block.forward(x, memory, mask, memory_mask)
    return out, (block, params, cache)


def seq2seq_block_backward(d_out, cache):
    """-> (d_x, d_memory, d_weights...)."""
    block, params, inner = cache
    d_x, d_memory = block.backward(d_out, inner)
    return (d_x, d_memory) + _grads(params)


def seq2seq_decoder_forward(memory, tgt_ids, *weights, vocab_size=5, max_len=4, n_heads=1, n_kv_heads=None,
                            n_decoder_layers=1, positions="learned", norm="layernorm", ffn="gelu",
                            ffn_hidden=None, prenorm=True, tie_head=True, logits_bias=False, attn_bias=True,
                            ffn_bias=True, src_mask=None, tgt_mask=None):
    """memory [B, M, d], tgt_ids [B, N] -> (logits [B, N, V], cache): ``decode_forward``."""
    recipe = dict(vocab_size=vocab_size, max_len=max_len, n_heads=n_heads, n_kv_heads=n_kv_heads,
                  n_decoder_layers=n_decoder_layers, positions=positions, norm=norm, ffn=ffn,
                  ffn_hidden=ffn_hidden, prenorm=prenorm, tie_head=tie_head, logits_bias=logits_bias,
                  attn_bias=attn_bias, ffn_bias=ffn_bias)
    model, params = _loaded("seq2seq_decoder", memory.shape[-1], recipe, weights, memory.dtype)
    out, cache = model.decode_forward(memory, tgt_ids, src_mask, tgt_mask)
    return out, (model, params, cache)


def seq2seq_decoder_backward(d_out, cache):
    """-> (d_memory, None for the ids, d_weights...)."""
    model, params, inner = cache
    return (model.decode_backward(d_out, inner), None) + _grads(params)
