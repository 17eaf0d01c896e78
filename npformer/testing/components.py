"""The components ``conform`` checks: each one's documented signature, inputs and reference.

A component is a function with a fixed signature (npformer's own plain function is the
example to follow). ``conform(name, forward, backward)`` calls ``forward(*args, **options)``
with the inputs its strategy draws, and ``backward(d_out, cache)`` with a random upstream
gradient; it compares both with npformer's reference (``references``) in float64.

``forward`` returns ``(out, cache)`` when a ``backward`` is given, else the output alone.
``backward`` returns one gradient per float input, in order (or one per input, None for
integer inputs). With ``vjp=`` instead of ``backward``, ``vjp(inputs, d_out)`` receives the
inputs as a dict ``{argument name: value}`` and returns the gradients the same way.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from . import layers
from . import references as ref
from . import layer_strategies as lst
from . import strategies as st


@dataclass(frozen=True)
class Component:
    """One checkable component: its signature, what it computes, its inputs and reference."""

    name: str
    title: str
    signature: str                  # how npformer's own version is called and what it returns
    draw: object                    # a hypothesis strategy of ``strategies.Example``
    reference: tuple                # (forward, backward) of dotted names under npformer, or callables
    gradients: str = ""             # what backward returns
    functions: tuple = ()           # npformer functions it runs ("t03_softmax.softmax_backward")
    notes: tuple = field(default_factory=tuple)

    def reference_pair(self):
        """npformer's (forward, backward), looked up now (a patch in place is what runs)."""
        forward, backward = self.reference
        if isinstance(forward, str):
            return ref.pair(forward, backward)
        return forward, backward

    def option_defaults(self):
        """{name: default} of the reference forward's keyword parameters with a default."""
        forward = self.reference_pair()[0]
        return {p.name: p.default for p in inspect.signature(forward).parameters.values()
                if p.default is not p.empty}

    @property
    def forward_only(self):
        """True for a component without a backward (the AdamW update, KV-cached decoding)."""
        return self.reference[1] is None


def _pair(name, title, signature, draw, module, fn, gradients, functions=()):
    forward, backward = f"{module}.{fn}_forward", f"{module}.{fn}_backward"
    return Component(name, title, signature, draw, (forward, backward), gradients,
                     (forward, backward) + tuple(functions))


SOFTMAX = ("t03_softmax.softmax_forward", "t03_softmax.softmax_backward")  # what attention runs inside

COMPONENTS = {c.name: c for c in (
    _pair("softmax", "softmax over an axis, with a boolean mask",
          "softmax_forward(x, axis=-1, mask=None) -> (y, cache)", st.softmax_inputs(),
          "t03_softmax", "softmax", "d_x"),
    _pair("log_softmax", "log-softmax over an axis", "log_softmax_forward(x, axis=-1) -> (y, cache)",
          st.softmax_inputs(with_mask=False), "t11_loss", "log_softmax", "d_x"),
    _pair("relu", "ReLU", "relu_forward(x) -> (y, cache)", st.elementwise_inputs(),
          "t06_activations", "relu", "d_x"),
    _pair("gelu", "GELU, exact (x Phi(x))", "gelu_forward(x) -> (y, cache)", st.elementwise_inputs(),
          "t06_activations", "gelu", "d_x"),
    _pair("gelu_tanh", "GELU, tanh approximation", "gelu_tanh_forward(x) -> (y, cache)",
          st.elementwise_inputs(), "t06_activations", "gelu_tanh", "d_x"),
    _pair("silu", "SiLU (x sigmoid(x))", "silu_forward(x) -> (y, cache)", st.elementwise_inputs(),
          "t06_activations", "silu", "d_x"),
    _pair("linear", "the linear layer y = x W + b", "linear_forward(x, weight, bias=None) -> (y, cache)",
          st.linear_inputs(), "t02_linear", "linear", "(d_x, d_weight, d_bias or None)"),
    Component("embedding", "a lookup table (ids read more than once)",
              "embedding_forward(ids, table) -> (table[ids], cache)", st.embedding_inputs(),
              (ref.embedding_forward, ref.embedding_backward), "(None, d_table)",
              ("t01_embedding.Embedding.forward", "t01_embedding.Embedding.backward")),
    _pair("attention", "scaled dot-product attention (every head its own keys)",
          "attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None) -> (out, cache)",
          st.attention_inputs(grouped=False), "t04_attention", "attention", "(d_q, d_k, d_v)",
          ("t04_attention.may_read",) + SOFTMAX),
    _pair("grouped_attention", "attention with key/value heads shared by groups of query heads (GQA, MQA)",
          "grouped_attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None) "
          "-> (out, cache)", st.attention_inputs(grouped=True), "t04_attention", "grouped_attention",
          "(d_q, d_k, d_v)", ("t04_attention.attention_forward", "t04_attention.attention_backward",
                              "t04_attention.may_read") + SOFTMAX),
    Component("multi_head_attention", "multi-head attention with Wq, Wk, Wv, Wo (GQA when w_k is narrower)",
              "multi_head_forward(x, w_q, w_k, w_v, w_o, n_heads, mask=None, causal=False) -> (out, cache)",
              st.multi_head_inputs(), (ref.multi_head_forward, ref.multi_head_backward),
              "(d_x, d_w_q, d_w_k, d_w_v, d_w_o)",
              ("t04_attention.MultiHeadAttention.forward", "t04_attention.MultiHeadAttention.backward",
               "t04_attention.MultiHeadAttention.split_heads", "t04_attention.MultiHeadAttention.merge_heads",
               "t04_attention.attention_forward", "t04_attention.attention_backward", "t04_attention.may_read",
               "t04_attention.grouped_attention_forward", "t04_attention.grouped_attention_backward") + SOFTMAX),
    Component("rope", "rotary position embedding (pairs turned by position-dependent angles)",
              "rope_forward(x, positions, base=10000.0, layout='half') -> (out, cache)", st.rope_inputs(),
              (ref.rope_forward, ref.rope_backward), "(d_x, None)",
              ("t05_rope.Rotary.forward", "t05_rope.Rotary.backward", "t05_rope.rotate", "t05_rope.Rotary.angles")),
    _pair("layernorm", "LayerNorm", "layernorm_forward(x, gamma, beta, eps=1e-5) -> (y, cache)",
          st.norm_inputs(), "t08_norm", "layernorm", "(d_x, d_gamma, d_beta)"),
    _pair("rmsnorm", "RMSNorm", "rmsnorm_forward(x, gamma, eps=1e-6) -> (y, cache)",
          st.norm_inputs(centred=False), "t08_norm", "rmsnorm", "(d_x, d_gamma)"),
    Component("swiglu", "the SwiGLU feed-forward network",
              "swiglu_forward(x, w_gate, w_up, w_down) -> (out, cache)", st.swiglu_inputs(),
              (ref.swiglu_forward, ref.swiglu_backward), "(d_x, d_w_gate, d_w_up, d_w_down)",
              ("t07_ffn.SwiGLU.forward", "t07_ffn.SwiGLU.backward", "t07_ffn.swiglu_gate_forward",
               "t07_ffn.swiglu_gate_backward")),
    _pair("cross_entropy", "cross-entropy over the counted targets (IGNORE_INDEX = -100 skipped)",
          "cross_entropy_forward(logits, targets, ignore_index=-100) -> (loss, cache)",
          st.cross_entropy_inputs(), "t11_loss", "cross_entropy", "(d_logits, None)",
          ("t11_loss.log_softmax_forward",)),
    _pair("l2_normalize", "L2 normalisation x / max(|x|, eps), as sentence embeddings are normalised",
          "l2_normalize_forward(x, eps=1e-12) -> (y, cache)", st.elementwise_inputs(), "t15_encoder",
          "l2_normalize", "d_x"),
    Component("adamw", "one AdamW update of one parameter",
              "adamw_update(data, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0) "
              "-> (data, m, v)", st.adamw_inputs(), ("training.optim.adamw_update", None), "",
              ("training.optim.adamw_update",)),
    _pair("flash_attention", "blockwise (flash) attention: block_size keys at a time, from a log-sum-exp",
          "flash_attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None, block_size=128) "
          "-> (out, cache)", st.flash_inputs(), "t18_flash_attention", "flash_attention", "(d_q, d_k, d_v)",
          ("t04_attention.may_read",)),
    Component("kv_decode", "decoding one position at a time through a KV cache",
              "decode_step(q_t, k_t, v_t, cache) -> (out_t, cache); cache is None at the first step",
              st.decode_inputs(), (ref.decode_reference, None), "",
              ("t13_kv_cache.LayerKV.write", "t13_kv_cache.LayerKV.extend")),
)}


BLOCK = ("t09_block.PreNormBlock.forward", "t09_block.PreNormBlock.backward",
         "t09_block.PostNormBlock.forward", "t09_block.PostNormBlock.backward")
MODEL = ("t10_model.TiedHead.forward", "t10_model.TiedHead.backward", "t10_model.DecoderLM.backward")
SEQ2SEQ = ("t17_seq2seq.EncoderDecoderBlock.backward", "t17_seq2seq.EncoderDecoder.decode_backward")
WEIGHTS = "then one array per parameter, in the module's named_parameters() order"

# Layers made of layers, their weights as arguments (``layers``): what the grader judges the MoE,
# block, model and seq2seq exercises on. Their signature follows npformer's own module layout, so
# they are not among the components ``conform`` offers for other people's code.
LAYERS = {c.name: c for c in (
    Component("moe", "a Mixture-of-Experts layer (SwiGLU experts, top-k routing, load-balancing loss)",
              f"moe_forward(x, *weights, n_experts, top_k, hidden, aux_weight, token_mask=None) -> (y, cache); "
              f"{WEIGHTS}", lst.moe_inputs(), (layers.moe_forward, layers.moe_backward),
              "(d_x, d_router, d_experts...)", ("t14_moe.MoE.forward", "t14_moe.MoE.backward")),
    Component("prenorm_block", "a Pre-Norm block: h = x + Attn(Norm1(x)), y = h + FFN(Norm2(h))",
              f"prenorm_block_forward(x, *weights, n_heads, n_kv_heads, norm, ffn, ffn_hidden, ffn_bias, "
              f"attn_bias, causal, mask=None) -> (y, cache); {WEIGHTS}", lst.block_inputs(prenorm=True),
              (layers.prenorm_block_forward, layers.block_backward), "(d_x, d_weights...)", BLOCK),
    Component("postnorm_block", "a Post-Norm block: h = Norm1(x + Attn(x)), y = Norm2(h + FFN(h))",
              f"postnorm_block_forward(x, *weights, ...) -> (y, cache), as prenorm_block", lst.block_inputs(prenorm=False),
              (layers.postnorm_block_forward, layers.block_backward), "(d_x, d_weights...)", BLOCK),
    Component("decoder_lm", "the decoder-only model: embeddings, blocks, final norm, (tied) head",
              f"decoder_lm_forward(ids, *weights, vocab_size, max_len, n_heads, ..., key_mask=None) -> "
              f"(logits, cache); {WEIGHTS}", lst.decoder_lm_inputs(),
              (layers.decoder_lm_forward, layers.decoder_lm_backward), "(None, d_weights...)", MODEL + BLOCK),
    Component("seq2seq_block", "an encoder-decoder layer: self-attention, cross-attention to the memory, FFN",
              f"seq2seq_block_forward(x, memory, *weights, ..., mask=None, memory_mask=None) -> (y, cache); "
              f"{WEIGHTS}", lst.seq2seq_block_inputs(),
              (layers.seq2seq_block_forward, layers.seq2seq_block_backward), "(d_x, d_memory, d_weights...)",
              SEQ2SEQ[:1]),
    Component("seq2seq_decoder", "the encoder-decoder's decoder half (decode_forward, decode_backward)",
              f"seq2seq_decoder_forward(memory, tgt_ids, *weights, ..., src_mask=None, tgt_mask=None) -> "
              f"(logits, cache); {WEIGHTS}", lst.seq2seq_decoder_inputs(),
              (layers.seq2seq_decoder_forward, layers.seq2seq_decoder_backward),
              "(d_memory, None, d_weights...)", SEQ2SEQ),
)}


def find(name):
    """The component called ``name`` (one of ``COMPONENTS`` or ``LAYERS``); ValueError listing
    them all otherwise."""
    if name in COMPONENTS:
        return COMPONENTS[name]
    if name in LAYERS:
        return LAYERS[name]
    raise ValueError(f"component: expected one of {', '.join(list(COMPONENTS) + list(LAYERS))}, got {name!r}")
