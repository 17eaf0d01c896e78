"""Every twin pair and how its inputs are drawn: one builder per pair, each drawing every
parameter of the plain forward function over what the function accepts.

``PAIRS[name] = (forward, backward or None, builder)``; a builder returns the forward's
parameters by name, all of them (``check_twins`` asserts so against the signature, and
``test_twin_differential`` asserts the signatures against ``PARAMETERS``).
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import npformer
from npformer.t05_rope import rotate
from npformer.t19_optim import adamw_update

from support.twin_inputs import broadcast_partner, case, laid_out, shapes, sizes


def _axis(data, ndim):
    """Any axis argument a numpy reduction takes: an int (either sign), None, a tuple (even ())."""
    if ndim == 0:
        return data.draw(st.sampled_from([None, ()]))
    kind = data.draw(st.sampled_from(["int", "int", "None", "tuple"]))
    if kind == "int":
        return data.draw(st.integers(-ndim, ndim - 1))
    if kind == "None":
        return None
    axes = data.draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    return tuple(a - ndim if data.draw(st.booleans()) else a for a in axes)


def softmax(data, make):
    shape = data.draw(shapes(0, 4))
    x = make.floats(shape)
    if shape and data.draw(st.integers(0, 4)) == 0:                  # scores already -inf
        x = np.where(make.rng.random(shape) < 0.3, -np.inf, x).astype(make.dtype)
    mask = None
    if data.draw(st.booleans()):
        mask = make.bools(broadcast_partner(shape, data))
    ndim = len(np.broadcast_shapes(shape, np.shape(mask)))
    return {"x": x, "axis": _axis(data, ndim), "mask": mask}


def elementwise(data, make):
    return {"x": make.floats(data.draw(shapes(0, 4)))}


def swiglu_gate(data, make):
    shape = data.draw(shapes(0, 4))
    other = broadcast_partner(shape, data)
    g_shape, u_shape = (shape, other) if data.draw(st.booleans()) else (other, shape)
    return {"g": make.floats(g_shape), "u": make.floats(u_shape)}


def linear(data, make):
    lead = data.draw(shapes(0, 3))
    d_in, d_out = data.draw(sizes(6)), data.draw(sizes(6))
    bias = make.floats((d_out,)) if data.draw(st.booleans()) else None
    return {"x": make.floats(lead + (d_in,)), "weight": make.floats((d_in, d_out)), "bias": bias}


def _norm_input(data, make):
    shape = data.draw(shapes(0, 3)) + (data.draw(sizes(6)),)
    return make.floats(shape), shape[-1], data.draw(st.sampled_from([1e-5, 1e-6, 0.1, 1.0]))


def layernorm(data, make):
    x, d, eps = _norm_input(data, make)
    return {"x": x, "gamma": make.floats((d,)), "beta": make.floats((d,)), "eps": eps}


def rmsnorm(data, make):
    x, d, eps = _norm_input(data, make)
    return {"x": x, "gamma": make.floats((d,)), "eps": eps}


def _mask_shape(data, target):
    """Any shape ``check_mask`` accepts for scores of shape ``target``: 0 to 4 axes, each 1
    or the target's."""
    ndim = data.draw(st.integers(0, len(target)))
    return tuple(data.draw(st.sampled_from([1, n])) for n in target[len(target) - ndim:])


def _attention(data, make, grouped, flash=False):
    B, H_kv, N, M = data.draw(sizes(3)), data.draw(st.integers(1, 3)), data.draw(sizes(5)), data.draw(sizes(7))
    H = H_kv * (data.draw(st.integers(1, 3)) if grouped else 1)
    D, Dv = data.draw(sizes(5)), data.draw(sizes(4))
    kwargs = {"q": make.floats((B, H, N, D)), "k": make.floats((B, H_kv, M, D)),
              "v": make.floats((B, H_kv, M, Dv)), "mask": None,
              "scale": data.draw(st.sampled_from([None, None, 0.5, 1.0, -0.3, 0.0])),
              "causal": data.draw(st.booleans()),
              "window": data.draw(st.one_of(st.none(), st.integers(1, M + 2)))}
    if data.draw(st.booleans()):
        kwargs["mask"] = make.bools(_mask_shape(data, (B, H, N, M)))
    if flash:
        kwargs["block_size"] = data.draw(st.one_of(st.integers(1, M + 2), st.just(128)))
    return kwargs


def attention(data, make):
    return _attention(data, make, grouped=False)


def grouped_attention(data, make):
    return _attention(data, make, grouped=True)


def flash_attention(data, make):
    return _attention(data, make, grouped=True, flash=True)


def cross_entropy(data, make):
    shape = data.draw(shapes(0, 3))
    V = data.draw(st.integers(1, 6))
    ignore_index = data.draw(st.sampled_from([npformer.IGNORE_INDEX, -1, 0, V - 1, 200]))
    kind = data.draw(st.sampled_from([np.int64, np.int32, np.int16, np.uint8]))
    targets = make.rng.integers(0, V, shape)
    ignored = make.rng.random(shape) < data.draw(st.sampled_from([0.3, 0.0, 1.0]))
    targets = np.where(ignored, ignore_index, targets)
    if kind == np.uint8:
        targets = np.where(targets < 0, 0, targets)                  # uint8 holds no negative id
    targets = laid_out(targets.astype(kind), data.draw(st.sampled_from(["C", "F", "stepped"])), make.rng)
    return {"logits": make.floats(shape + (V,)), "targets": targets, "ignore_index": ignore_index}


def rotation(data, make):
    D = 2 * data.draw(sizes(4))
    x = make.floats(data.draw(shapes(0, 3)) + (D,))
    rotated = data.draw(st.one_of(st.none(), st.integers(0, D // 2).map(lambda r: 2 * r)))
    half = (D if rotated is None else rotated) // 2
    angles = x.shape[:-1] + (half,)
    cos_shape, sin_shape = broadcast_partner(angles, data, False), broadcast_partner(angles, data, False)
    return {"x": x, "cos": make.floats(cos_shape), "sin": make.floats(sin_shape),
            "layout": data.draw(st.sampled_from(["half", "interleaved"])), "rotated": rotated}


def adamw(data, make):
    shape = data.draw(shapes(0, 3))
    b1, b2 = data.draw(st.sampled_from([0.9, 0.0, 0.5])), data.draw(st.sampled_from([0.999, 0.0, 0.95]))
    kwargs = {"data": make.floats(shape), "grad": make.floats(shape), "m": make.floats(shape),
              "v": make.floats(shape, positive=True), "step": data.draw(st.sampled_from([1, 2, 7, 1000])),
              "lr": data.draw(st.sampled_from([1e-3, 0.1, 0.0])), "betas": (b1, b2),
              "eps": data.draw(st.sampled_from([1e-8, 1e-3])),
              "weight_decay": data.draw(st.sampled_from([0.0, 0.1]))}
    # arguments that are one array: the plain update reads them all before it returns new ones
    shared = data.draw(st.sampled_from([None, None, None, ("grad", "data"), ("grad", "m"), ("m", "v"),
                                        ("m", "data")]))
    if shared:
        kwargs[shared[0]] = kwargs[shared[1]] = make.floats(shape, positive=True)
    return kwargs


PAIRS = {
    "softmax": (npformer.softmax_forward, npformer.softmax_backward, softmax),
    "gelu_tanh": (npformer.gelu_tanh_forward, npformer.gelu_tanh_backward, elementwise),
    "silu": (npformer.silu_forward, npformer.silu_backward, elementwise),
    "swiglu_gate": (npformer.swiglu_gate_forward, npformer.swiglu_gate_backward, swiglu_gate),
    "linear": (npformer.linear_forward, npformer.linear_backward, linear),
    "layernorm": (npformer.layernorm_forward, npformer.layernorm_backward, layernorm),
    "rmsnorm": (npformer.rmsnorm_forward, npformer.rmsnorm_backward, rmsnorm),
    "attention": (npformer.attention_forward, npformer.attention_backward, attention),
    "grouped_attention": (npformer.grouped_attention_forward, npformer.grouped_attention_backward,
                          grouped_attention),
    "flash_attention": (npformer.flash_attention_forward, npformer.flash_attention_backward,
                        flash_attention),
    "cross_entropy": (npformer.cross_entropy_forward, npformer.cross_entropy_backward, cross_entropy),
    "rotate": (rotate, None, rotation),
    "adamw_update": (adamw_update, None, adamw),
}

# The parameters each plain function of a pair has, every one drawn above (by name).
PARAMETERS = {
    "softmax_forward": ("x", "axis", "mask"),
    "gelu_tanh_forward": ("x",), "silu_forward": ("x",), "swiglu_gate_forward": ("g", "u"),
    "linear_forward": ("x", "weight", "bias"),
    "layernorm_forward": ("x", "gamma", "beta", "eps"), "rmsnorm_forward": ("x", "gamma", "eps"),
    "attention_forward": ("q", "k", "v", "mask", "scale", "causal", "window"),
    "grouped_attention_forward": ("q", "k", "v", "mask", "scale", "causal", "window"),
    "flash_attention_forward": ("q", "k", "v", "mask", "scale", "causal", "window", "block_size"),
    "cross_entropy_forward": ("logits", "targets", "ignore_index"),
    "rotate": ("x", "cos", "sin", "layout", "rotated"),
    "adamw_update": ("data", "grad", "m", "v", "step", "lr", "betas", "eps", "weight_decay"),
    # every backward: the upstream gradient (an array of the output's shape, or the loss's
    # scalar) and the forward's cache, from either track
    **{f"{name}_backward": ("d_out", "cache") for name in
       ("softmax", "gelu_tanh", "silu", "swiglu_gate", "linear", "layernorm", "rmsnorm",
        "attention", "grouped_attention", "flash_attention")},
    "cross_entropy_backward": ("d_loss", "cache"),
}

CASES = {name: case(name, builder, wide="attention" not in name) for name, (_, _, builder) in PAIRS.items()}

# Twins of a module's method, which add into a parameter's gradient rather than return a
# result: each is held equal to its plain method by a test file of its own.
METHODS = {"npformer.t01_embedding.Embedding.backward": "tests/fast/test_embedding_twin.py"}
