"""Inputs for the held-out mistakes and alternatives: for each exercise file, cases that run
every exercise function of that file and return the numbers it produces.

A *case* is ``case(mod, dtype) -> {label: array}``, where ``mod`` is one version of the file
(the answer key's, or the key with one mistake or alternative applied) loaded as a module of
the npformer package (``load``), so its relative imports reach the library's other files.
Every case draws its inputs from its own seeded generator, so two versions of a file see the
same inputs and their outputs can be compared label by label. Parameters are random (gains
away from 1), parameter gradients are pre-filled with random numbers before a backward (so
that assigning instead of adding shows), upstream gradients are random (never all ones).
"""
from __future__ import annotations

import itertools
import sys
import types

import numpy as np

from npformer import t01_embedding, t04_attention, t05_rope, t08_norm, t17_seq2seq

_serial = itertools.count()


def load(relpath, source):
    """``source`` (the text of the key's ``relpath``, maybe edited) as a fresh module of
    npformer (``npformer.training`` for ``training/...``)."""
    package = "npformer.training" if relpath.startswith("training/") else "npformer"
    name = f"{package}._heldout_{next(_serial)}"
    module = types.ModuleType(name)
    module.__package__ = package
    module.__file__ = f"<heldout version of {relpath}>"
    sys.modules[name] = module
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module


# -- helpers ---------------------------------------------------------------------------------
def normal(rng, shape, dtype, scale=1.0):
    return (rng.normal(size=shape) * scale).astype(dtype)


def randomize(module, rng):
    """Random parameters (gains 1 + noise), random pre-filled gradients."""
    for name, p in module.named_parameters():
        if name.endswith("gamma"):
            p.data[...] = 1 + 0.3 * rng.normal(size=p.shape)
        else:
            p.data[...] = 0.5 * rng.normal(size=p.shape)
        p.grad[...] = rng.normal(size=p.shape)
    return module


def grads(module, prefix):
    return {f"{prefix}.grad.{name}": p.grad.copy() for name, p in module.named_parameters()}


def record(out, prefix, **arrays):
    for key, value in arrays.items():
        if value is not None:
            out[f"{prefix}.{key}"] = np.array(value, copy=True)


# -- 01 softmax ------------------------------------------------------------------------------
def softmax_case(mod, dtype):
    rng = np.random.default_rng(1)
    out = {}
    mask = np.tril(np.ones((4, 4), bool))[None, None].repeat(2, axis=0)   # [2, 1, 4, 4]
    mask[1, 0, 2] = False                                                  # one row reads nothing
    settings = [
        ("rows", normal(rng, (2, 3, 4, 5), dtype, 2), -1, None),
        ("axis1", normal(rng, (3, 5, 4), dtype, 2), 1, None),
        ("axis0", normal(rng, (6, 3), dtype, 2), 0, None),
        ("masked", normal(rng, (2, 1, 4, 4), dtype, 2), -1, mask),
        # rows far from 0: no overflow and no underflow only with each row's own max shift
        ("large", (normal(rng, (2, 6), dtype, 3) + np.array([[-800.0], [800.0]])).astype(dtype), -1, None),
    ]
    for label, x, axis, m in settings:
        y, cache = mod.softmax_forward(x, axis=axis, mask=m)
        d_y = normal(rng, y.shape, dtype)
        record(out, label, y=y, d_x=mod.softmax_backward(d_y, cache))
    return out


# -- 02 activations --------------------------------------------------------------------------
def activations_case(mod, dtype):
    rng = np.random.default_rng(2)
    out = {}
    for name in ("relu", "gelu", "gelu_tanh", "silu"):
        forward, backward = getattr(mod, f"{name}_forward"), getattr(mod, f"{name}_backward")
        x = normal(rng, (4, 7), dtype, 2)
        y, cache = forward(x)
        record(out, name, y=y, d_x=backward(normal(rng, y.shape, dtype), cache))
    return out


# -- 03 linear -------------------------------------------------------------------------------
def linear_functions_case(mod, dtype):
    rng = np.random.default_rng(3)
    out = {}
    weight, bias = normal(rng, (5, 3), dtype), normal(rng, (3,), dtype)
    for shape in [(6, 5), (2, 4, 5), (2, 2, 3, 5)]:
        for b in (bias, None):
            x = normal(rng, shape, dtype)
            y, cache = mod.linear_forward(x, weight, b)
            d_x, d_w, d_b = mod.linear_backward(normal(rng, y.shape, dtype), cache)
            record(out, f"fn{len(shape)}{'b' if b is not None else ''}", y=y, d_x=d_x, d_w=d_w, d_b=d_b)
    return out


def linear_module_case(mod, dtype):
    rng = np.random.default_rng(4)
    out = {}
    for shape, bias in [((6, 5), True), ((2, 4, 5), True), ((2, 4, 5), False)]:
        layer = randomize(mod.Linear(5, 3, bias=bias, rng=rng, dtype=dtype), rng)
        x = normal(rng, shape, dtype)
        y, cache = layer.forward(x)
        d_x = layer.backward(normal(rng, y.shape, dtype), cache)
        label = f"Linear{len(shape)}{'b' if bias else ''}"
        record(out, label, y=y, d_x=d_x)
        out.update(grads(layer, label))
    return out


# -- 04 embedding ----------------------------------------------------------------------------
def embedding_case(mod, dtype):
    rng = np.random.default_rng(5)
    out = {}
    ids = np.array([[1, 2, 1, 0, 3], [0, 3, 3, 6, 1]])           # repeated ids, padding id 0
    for padding_idx in (0, None):
        table = randomize(mod.Embedding(7, 4, rng, dtype=dtype, padding_idx=padding_idx), rng)
        y, cache = table.forward(ids)
        table.backward(normal(rng, y.shape, dtype), cache)
        label = f"Embedding{padding_idx}"
        record(out, label, y=y)
        out.update(grads(table, label))
    record(out, "sinusoid", a=mod.sinusoid_table(10, 6), b=mod.sinusoid_table(9, 8, base=100.0))
    return out


def embeddings_case(mod, dtype):
    rng = np.random.default_rng(6)
    out = {}
    ids = np.array([[1, 2, 1, 0, 3], [0, 3, 3, 6, 1]])
    segments = np.array([[0, 0, 1, 1, 1], [0, 1, 1, 1, 1]])
    for label, shared, with_norm, scale in [("shared", True, True, 2.0), ("batched", False, False, 1.0),
                                            ("plain", True, False, 1.0)]:
        tokens = mod.Embedding(7, 4, rng, dtype=dtype, padding_idx=0)
        positions = mod.LearnedPositions(6, 4, rng, dtype=dtype)
        seg = mod.Embedding(2, 4, rng, dtype=dtype)
        norm = t08_norm.LayerNorm(4, dtype=dtype) if with_norm else None
        embed = randomize(mod.Embeddings(tokens, positions, seg, norm, scale=scale), rng)
        pos = np.arange(1, 6) if shared else np.array([[0, 1, 2, 3, 4], [2, 3, 4, 5, 0]])
        y, cache = embed.forward(ids, pos, segments)
        embed.backward(normal(rng, y.shape, dtype), cache)
        record(out, label, y=y)
        out.update(grads(embed, label))
    return out


# -- 05 attention, 06 multi-head -----------------------------------------------------------------
def attention_case(mod, dtype):
    rng = np.random.default_rng(7)
    out = {}
    B, H, N, M, D, Dv = 2, 3, 4, 6, 5, 3
    q, k, v = normal(rng, (B, H, N, D), dtype), normal(rng, (B, H, M, D), dtype), normal(rng, (B, H, M, Dv), dtype)
    right = t04_attention.padding_mask(lengths=np.array([6, 3]), n=M)                 # [B, 1, 1, M]
    left = t04_attention.padding_mask(key_mask=np.array([[False] * 3 + [True] * 3, [True] * 6]))
    nothing = t04_attention.padding_mask(key_mask=np.array([[True] * 6, [False] * 6]))
    settings = [
        ("none", {}),
        ("causal", dict(causal=True)),
        ("padded", dict(mask=right)),
        ("left_causal", dict(mask=left, causal=True)),          # a query with no readable key
        ("empty_batch", dict(mask=nothing)),
        ("window", dict(causal=True, window=2)),
        ("scale", dict(scale=0.3, mask=right)),
    ]
    for label, options in settings:
        y, cache = mod.attention_forward(q, k, v, **options)
        d_q, d_k, d_v = mod.attention_backward(normal(rng, y.shape, dtype), cache)
        record(out, label, y=y, weights=cache.weights, d_q=d_q, d_k=d_k, d_v=d_v)
    for window in (None, 3):
        record(out, f"may_read{window}", table=mod.may_read(np.arange(2, 7)[:, None], np.arange(7)[None, :], window))
    return out


def mha_settings(rotary):
    """(label, module arguments, batch mask, positions) for multi-head attention."""
    key_mask = np.array([[True] * 5, [True, True, True, False, False]])
    mask = t04_attention.padding_mask(key_mask=key_mask)
    return [
        ("mha", dict(d=12, n_heads=3, bias=True, causal=True), None, None),
        ("gqa_rope_half", dict(d=16, n_heads=4, n_kv_heads=2, causal=True,
                               rope=rotary(4, layout="half")), mask, None),
        ("mqa_rope_interleaved", dict(d=16, n_heads=4, n_kv_heads=1, causal=True, window=2, bias=True,
                                      rope=rotary(4, layout="interleaved")), None,
         np.array([[3, 4, 5, 6, 7], [0, 1, 2, 3, 4]])),
        ("partial_rope", dict(d=16, n_heads=2, causal=True, rope=rotary(8, base=100.0, fraction=0.5)),
         None, np.arange(2, 7)),
        ("bidirectional", dict(d=12, n_heads=2), mask, None),
    ]


def run_mha(t04, rotary, dtype, seed, only_rope=False):
    rng = np.random.default_rng(seed)
    out = {}
    for label, options, mask, positions in mha_settings(rotary):
        if only_rope and "rope" not in options:
            continue
        d = options.pop("d")
        layer = randomize(t04.MultiHeadAttention(d, rng=rng, dtype=dtype, **options), rng)
        x = normal(rng, (2, 5, d), dtype)
        y, cache = layer.forward(x, mask, positions)
        d_x = layer.backward(normal(rng, y.shape, dtype), cache)
        record(out, label, y=y, d_x=d_x)
        out.update(grads(layer, label))
    return out


def mha_case(mod, dtype):
    return run_mha(mod, t05_rope.Rotary, dtype, 8)


# -- 07 rope -------------------------------------------------------------------------------
def rope_case(mod, dtype):
    rng = np.random.default_rng(9)
    out = {}
    for D, layout, fraction, theta in [(8, "half", 1.0, 10000.0), (8, "interleaved", 1.0, 10000.0),
                                       (8, "half", 0.5, 100.0), (6, "interleaved", 0.7, 10.0)]:
        rotary = mod.Rotary(D, base=theta, layout=layout, fraction=fraction)
        label = f"{layout}{D}_{fraction}"
        record(out, label, angles=rotary.angles(np.arange(6)))
        x = normal(rng, (2, 3, 5, D), dtype)
        for name, positions in [("shared", np.arange(3, 8)), ("batched", rng.integers(0, 20, (2, 5)))]:
            y, cache = rotary.forward(x, positions)
            d_x = rotary.backward(normal(rng, y.shape, dtype), cache)
            record(out, f"{label}_{name}", y=y, d_x=d_x)
    out.update(run_mha(t04_attention, mod.Rotary, dtype, 10, only_rope=True))
    return out


# -- 08 ffn --------------------------------------------------------------------------------------
def ffn_case(mod, dtype):
    rng = np.random.default_rng(11)
    out = {}
    for activation, bias in [("gelu", True), ("relu", True), ("gelu_tanh", False)]:
        layer = randomize(mod.FFN(6, hidden=10, activation=activation, bias=bias, rng=rng, dtype=dtype), rng)
        x = normal(rng, (2, 3, 6), dtype)
        y, cache = layer.forward(x)
        record(out, f"FFN_{activation}", y=y, d_x=layer.backward(normal(rng, y.shape, dtype), cache))
        out.update(grads(layer, f"FFN_{activation}"))
    for shape, bias in [((2, 3, 6), False), ((5, 6), True)]:
        layer = randomize(mod.SwiGLU(6, hidden=8, bias=bias, rng=rng, dtype=dtype), rng)
        x = normal(rng, shape, dtype)
        y, cache = layer.forward(x)
        label = f"SwiGLU{len(shape)}"
        record(out, label, y=y, d_x=layer.backward(normal(rng, y.shape, dtype), cache))
        out.update(grads(layer, label))
    g, u = normal(rng, (3, 8), dtype, 2), normal(rng, (3, 8), dtype)
    h, cache = mod.swiglu_gate_forward(g, u)
    d_g, d_u = mod.swiglu_gate_backward(normal(rng, h.shape, dtype), cache)
    record(out, "gate", h=h, d_g=d_g, d_u=d_u)
    return out


# -- 09 norm ---------------------------------------------------------------------------------
def norm_functions_case(mod, dtype):
    rng = np.random.default_rng(12)
    out = {}
    for shape in [(2, 3, 6), (5, 6), (2, 2, 3, 6)]:
        x = normal(rng, shape, dtype, 2) + dtype(0.5)
        gamma, beta = (1 + normal(rng, (6,), dtype, 0.3)).astype(dtype), normal(rng, (6,), dtype)
        y, cache = mod.layernorm_forward(x, gamma, beta, eps=1e-5)
        d_x, d_gamma, d_beta = mod.layernorm_backward(normal(rng, y.shape, dtype), cache)
        record(out, f"ln{len(shape)}", y=y, d_x=d_x, d_gamma=d_gamma, d_beta=d_beta)
        y, cache = mod.rmsnorm_forward(x, gamma, eps=1e-6)
        d_x, d_gamma = mod.rmsnorm_backward(normal(rng, y.shape, dtype), cache)
        record(out, f"rms{len(shape)}", y=y, d_x=d_x, d_gamma=d_gamma)
    return out


def norm_modules_case(mod, dtype):
    rng = np.random.default_rng(13)
    out = {}
    for cls in (mod.LayerNorm, mod.RMSNorm):
        for shape in [(2, 3, 6), (5, 6)]:
            layer = randomize(cls(6, dtype=dtype), rng)
            x = normal(rng, shape, dtype, 2)
            y, cache = layer.forward(x)
            label = f"{cls.__name__}{len(shape)}"
            record(out, label, y=y, d_x=layer.backward(normal(rng, y.shape, dtype), cache))
            out.update(grads(layer, label))
    return out


# -- 10 block ----------------------------------------------------------------------------------
def block_case(mod, dtype):
    rng = np.random.default_rng(14)
    out = {}
    key_mask = np.array([[True] * 5, [True, True, True, True, False]])
    padding = t04_attention.padding_mask(key_mask=key_mask)
    settings = [
        ("pre_ln", dict(d_model=8, n_heads=2), None, None),
        ("post_ln", dict(d_model=8, n_heads=2, prenorm=False, causal=False, ffn="relu"), padding, None),
        ("pre_llama", dict(d_model=8, n_heads=4, n_kv_heads=2, norm="rmsnorm", ffn="swiglu", rope=True,
                           ffn_bias=False), padding, None),
        ("post_llama", dict(d_model=8, n_heads=2, prenorm=False, norm="rmsnorm", ffn="swiglu"), None, None),
        ("pre_moe", dict(d_model=8, n_heads=2, n_experts=3, top_k=2, ffn="swiglu"), padding,
         np.array([0.3, -0.2, 0.5])),
        ("post_moe", dict(d_model=8, n_heads=2, prenorm=False, n_experts=3, top_k=2, ffn="gelu"), None, None),
    ]
    for label, options, mask, d_router in settings:
        block = randomize(mod.build_block(mod.BlockConfig(**options), rng, dtype), rng)
        x = normal(rng, (2, 5, 8), dtype)
        moe = bool(options.get("n_experts"))
        ffn_inputs = {"token_mask": key_mask} if moe and mask is not None else {}
        y, cache = block.forward(x, mask, None, None, **ffn_inputs)
        ffn_grads = {} if d_router is None else {"d_mean_probs": d_router.astype(dtype)}
        d_x = block.backward(normal(rng, y.shape, dtype), cache, **ffn_grads)
        record(out, label, y=y, d_x=d_x)
        out.update(grads(block, label))
    return out


# -- 11 model ----------------------------------------------------------------------------------
def model_case(mod, dtype):
    rng = np.random.default_rng(15)
    out = {}
    small = dict(vocab_size=11, d_model=8, n_heads=2, n_layers=2, max_len=8)
    key_mask = np.array([[True] * 6, [True] * 4 + [False] * 2])
    settings = [
        ("default", mod.DecoderConfig(**small), None),
        ("gpt2_padded", mod.DecoderConfig.gpt2(**small, pad_token_id=0), key_mask),
        ("llama_gqa", mod.DecoderConfig.llama(**{**small, "n_heads": 4}, n_kv_heads=2), None),
        ("mixtral_pooled", mod.DecoderConfig.mixtral(**small, n_experts=3, moe_aux_objective="pooled",
                                                     moe_aux_weight=0.3), key_mask),
        ("mixtral_per_layer", mod.DecoderConfig.mixtral(**small, n_experts=3, moe_aux_weight=0.2), None),
    ]
    ids = np.array([[1, 5, 0, 7, 2, 9], [3, 3, 10, 4, 0, 0]])
    for label, config, mask in settings:
        model = randomize(mod.DecoderLM(config, rng, dtype), rng)
        logits, cache = model.forward(ids, mask)
        model.backward(normal(rng, logits.shape, dtype), cache)
        record(out, label, logits=logits)
        out.update(grads(model, label))
    table = randomize(t01_embedding.Embedding(11, 8, rng, dtype=dtype), rng)
    head = mod.TiedHead(table)
    x = normal(rng, (2, 3, 8), dtype)
    logits, cache = head.forward(x)
    record(out, "head", logits=logits, d_x=head.backward(normal(rng, logits.shape, dtype), cache))
    out.update(grads(table, "head"))
    return out


# -- 12 loss --------------------------------------------------------------------------------
def loss_case(mod, dtype):
    rng = np.random.default_rng(16)
    out = {}
    for label, x, axis in [("rows", normal(rng, (3, 4, 6), dtype, 2), -1),
                           ("axis1", normal(rng, (3, 4, 6), dtype, 2), 1),
                           ("large", (normal(rng, (2, 5), dtype, 3) + np.array([[-900.0], [900.0]])).astype(dtype), -1)]:
        y, cache = mod.log_softmax_forward(x, axis=axis)
        record(out, f"logsm_{label}", y=y, d_x=mod.log_softmax_backward(normal(rng, y.shape, dtype), cache))
    ignored = mod.IGNORE_INDEX
    settings = [
        ("ignored", normal(rng, (2, 5, 7), dtype, 2),
         np.array([[1, ignored, 6, 0, ignored], [2, 2, ignored, 5, 3]]), ignored, 0.7),
        ("flat", normal(rng, (6, 7), dtype, 2), np.array([0, 1, 2, 3, 4, 5]), ignored, 1.0),
        ("all_ignored", normal(rng, (2, 3, 7), dtype), np.full((2, 3), ignored), ignored, 1.3),
        ("ignore_zero", normal(rng, (2, 4, 7), dtype), np.array([[0, 3, 0, 6], [1, 0, 2, 4]]), 0, 2.0),
        ("large", (normal(rng, (3, 7), dtype, 5) + np.array([[-900.0], [0.0], [900.0]])).astype(dtype),
         np.array([2, ignored, 4]), ignored, 1.0),
    ]
    for label, logits, targets, ignore_index, d_loss in settings:
        loss, cache = mod.cross_entropy_forward(logits, targets, ignore_index)
        d_logits, d_targets = mod.cross_entropy_backward(d_loss, cache)
        assert d_targets is None
        record(out, f"ce_{label}", loss=loss, d_logits=d_logits)
    return out


# -- 13 optim -------------------------------------------------------------------------------------
def optim_case(mod, dtype):
    rng = np.random.default_rng(17)
    out = {}
    for label, weight_decay, scale, lr in [("decay", 0.1, 1.0, 1e-2), ("tiny_grads", 0.0, 1e-5, 1e-3),
                                           ("big_lr", 0.05, 1.0, 0.1)]:
        data = normal(rng, (4, 3), dtype)
        m, v = np.zeros_like(data), np.zeros_like(data)
        for step in range(1, 7):
            grad = normal(rng, data.shape, dtype, scale)
            data, m, v = mod.adamw_update(data.copy(), grad, m.copy(), v.copy(), step, lr, betas=(0.9, 0.98),
                                          eps=1e-8, weight_decay=weight_decay)
            record(out, f"{label}{step}", data=data, m=m, v=v)
    return out


# -- 15 moe ----------------------------------------------------------------------------------
def moe_case(mod, dtype):
    rng = np.random.default_rng(18)
    out = {}
    token_mask = np.array([[True] * 5, [True, True, True, False, False]])
    for label, options, shape, mask in [
            ("swiglu", dict(n_experts=4, top_k=2, hidden=8, expert="swiglu"), (2, 5, 6), token_mask),
            ("gelu_top1", dict(n_experts=3, top_k=1, hidden=5, expert="gelu", bias=True), (7, 6), None)]:
        moe = randomize(mod.MoE(6, rng=rng, dtype=dtype, **options), rng)
        x = normal(rng, shape, dtype)
        y, cache = moe.forward(x, mask)
        record(out, label, y=y, aux=cache.aux_loss)
        for how, extra in [("default", {}), ("d_aux", dict(d_aux=0.3)),
                           ("d_mean_probs", dict(d_mean_probs=normal(rng, (options["n_experts"],), dtype)))]:
            d_x = moe.backward(normal(rng, y.shape, dtype), cache, **extra)
            record(out, f"{label}_{how}", d_x=d_x)
            out.update(grads(moe, f"{label}_{how}"))
    return out


# -- 16 encoder ------------------------------------------------------------------------------
def pooling_case(mod, dtype):
    rng = np.random.default_rng(19)
    out = {}
    states = normal(rng, (3, 5, 4), dtype)
    key_mask = np.array([[True] * 5, [True, True, False, False, False], [False] * 5])
    for label, mask in [("masked", key_mask), ("unmasked", None)]:
        pooled, cache = mod.mean_pool_forward(states, mask)
        record(out, f"pool_{label}", y=pooled, d_x=mod.mean_pool_backward(normal(rng, pooled.shape, dtype), cache))
    x = normal(rng, (4, 5), dtype, 2)
    x[3] *= dtype(1e-14)                                     # shorter than eps: a plain scaling there
    for label, value in [("rows", x), ("batched", normal(rng, (2, 3, 4), dtype))]:
        y, cache = mod.l2_normalize_forward(value)
        record(out, f"l2_{label}", y=y, d_x=mod.l2_normalize_backward(normal(rng, y.shape, dtype), cache))
    return out


def encoder_case(mod, dtype):
    rng = np.random.default_rng(20)
    out = {}
    small = dict(vocab_size=13, d_model=8, n_heads=2, n_layers=2, max_len=8)
    ids = np.array([[2, 5, 7, 1, 0, 0], [3, 12, 4, 4, 9, 1]])
    key_mask = np.array([[True] * 4 + [False] * 2, [True] * 6])
    segments = np.array([[0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1]])
    for label, config, seg in [("bert", mod.EncoderConfig(**small, pad_token_id=0), segments),
                               ("pre_rope", mod.EncoderConfig(**small, prenorm=True, positions="rope",
                                                              type_vocab_size=0, norm="rmsnorm"), None)]:
        encoder = randomize(mod.Encoder(config, rng, dtype), rng)
        states, cache = encoder.forward(ids, key_mask, seg)
        encoder.backward(normal(rng, states.shape, dtype), cache)
        record(out, label, states=states)
        out.update(grads(encoder, label))
    return out


# -- 17 seq2seq ------------------------------------------------------------------------------
def cross_attention_case(mod, dtype):
    rng = np.random.default_rng(21)
    out = {}
    src_mask = t04_attention.padding_mask(key_mask=np.array([[True] * 5, [True, True, True, False, False]]))
    for label, options, mask in [("gqa", dict(n_kv_heads=2, d_memory=6, bias=True), src_mask),
                                 ("plain", dict(d_memory=6), None)]:
        layer = randomize(mod.CrossAttention(8, 4, rng=rng, dtype=dtype, **options), rng)
        x, memory = normal(rng, (2, 3, 8), dtype), normal(rng, (2, 5, 6), dtype)
        y, cache = layer.forward(x, memory, mask)
        d_x, d_memory = layer.backward(normal(rng, y.shape, dtype), cache)
        record(out, label, y=y, d_x=d_x, d_memory=d_memory)
        out.update(grads(layer, label))
    # the layer inside a decoder block (the library's block, this file's cross-attention)
    for prenorm in (True, False):
        config = t17_seq2seq.Seq2SeqConfig(vocab_size=13, d_model=8, n_heads=2, prenorm=prenorm)
        block = t17_seq2seq.build_decoder_block(config, rng, dtype)
        block.cross_attn = mod.CrossAttention(8, 2, rng=rng, dtype=dtype, bias=True)
        randomize(block, rng)
        x, memory = normal(rng, (2, 3, 8), dtype), normal(rng, (2, 5, 8), dtype)
        y, cache = block.forward(x, memory, None, src_mask)
        d_x, d_memory = block.backward(normal(rng, y.shape, dtype), cache)
        record(out, f"block{prenorm}", y=y, d_x=d_x, d_memory=d_memory)
        out.update(grads(block, f"block{prenorm}"))
    return out


def seq2seq_case(mod, dtype):
    rng = np.random.default_rng(22)
    out = {}
    small = dict(vocab_size=13, d_model=8, n_heads=2, n_decoder_layers=2, max_len=8)
    src = np.array([[2, 5, 7, 1, 0], [3, 12, 4, 4, 9]])
    tgt = np.array([[1, 6, 8, 0], [2, 2, 11, 5]])
    src_mask = np.array([[True] * 4 + [False], [True] * 5])
    tgt_mask = np.array([[True] * 3 + [False], [True] * 4])
    settings = [
        ("pre", mod.Seq2SeqConfig(**small)),
        ("bart", mod.Seq2SeqConfig.bart(**small, pad_token_id=0)),
        ("untied_gqa", mod.Seq2SeqConfig(**{**small, "n_heads": 4}, n_kv_heads=1, share_embeddings=False,
                                         tie_head=False, logits_bias=True)),
    ]
    for label, config in settings:
        model = randomize(mod.EncoderDecoder(config, rng, dtype), rng)
        logits, cache = model.forward(src, tgt, src_mask, tgt_mask)
        model.backward(normal(rng, logits.shape, dtype), cache)
        record(out, label, logits=logits)
        out.update(grads(model, label))
        memory = normal(rng, (2, 5, 8), dtype)
        logits, cache = model.decode_forward(memory, tgt, src_mask, tgt_mask)
        record(out, f"{label}_decode", logits=logits,
               d_memory=model.decode_backward(normal(rng, logits.shape, dtype), cache))
        out.update(grads(model, f"{label}_decode"))
    return out


# -- 18 flash ------------------------------------------------------------------------------
def flash_case(mod, dtype):
    rng = np.random.default_rng(23)
    out = {}
    B, H, N, M, D, Dv = 2, 4, 5, 7, 3, 4
    q = normal(rng, (B, H, N, D), dtype, 1.5)
    key_mask = np.array([[False] * 4 + [True] * 3, [True] * 7])
    padded = t04_attention.padding_mask(key_mask=key_mask)
    for label, H_kv, options in [("gqa_b2", 2, dict(block_size=2)),
                                 ("mqa_causal_b3", 1, dict(block_size=3, causal=True)),
                                 ("window_b2", 2, dict(block_size=2, causal=True, window=3)),
                                 ("mask_causal_b4", 4, dict(block_size=4, causal=True, mask=padded)),
                                 ("mask_one_block", 2, dict(block_size=128, mask=padded, scale=0.4))]:
        k, v = normal(rng, (B, H_kv, M, D), dtype, 1.5), normal(rng, (B, H_kv, M, Dv), dtype)
        y, cache = mod.flash_attention_forward(q, k, v, **options)
        d_q, d_k, d_v = mod.flash_attention_backward(normal(rng, y.shape, dtype), cache)
        record(out, label, y=y, lse=cache.lse, d_q=d_q, d_k=d_k, d_v=d_v)
    return out


# The cases of each exercise file (the key's names).
CASES = {
    "t03_softmax.py": [softmax_case],
    "t06_activations.py": [activations_case],
    "t02_linear.py": [linear_functions_case, linear_module_case],
    "t01_embedding.py": [embedding_case, embeddings_case],
    "t04_attention.py": [attention_case, mha_case],
    "t05_rope.py": [rope_case],
    "t07_ffn.py": [ffn_case],
    "t08_norm.py": [norm_functions_case, norm_modules_case],
    "t09_block.py": [block_case],
    "t10_model.py": [model_case],
    "t11_loss.py": [loss_case],
    "t19_optim.py": [optim_case],
    "t14_moe.py": [moe_case],
    "t15_encoder.py": [pooling_case, encoder_case],
    "t16_cross_attention.py": [cross_attention_case],
    "t17_seq2seq.py": [seq2seq_case],
    "t18_flash_attention.py": [flash_case],
}


def run(mod, relpath, dtype=np.float64):
    """Every case of ``relpath`` on ``mod``: {label: array}."""
    results = {}
    for case in CASES[relpath]:
        for label, value in case(mod, dtype).items():
            results[f"{case.__name__}:{label}"] = value
    return results
