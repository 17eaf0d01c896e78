"""Hypothesis strategies that know where Transformer code breaks, for your own tests.

Values are odd multiples of 1/8 in [-15/8, 15/8]: never exactly 0 (where ReLU's slope is a
matter of convention), printed short, and shrunk by hypothesis towards +-1/8. Sizes shrink
towards 1. The strategies draw what hand-picked tests miss: a query row with no readable
key, masks of every shape that broadcasts, key/value heads shared by groups of query heads
(GQA), sliding windows together with padding, queries after cached keys, both RoPE pair
layouts and position offsets, ignored targets.

    from hypothesis import given
    from npformer.testing import strategies as nst

    @given(nst.attention_inputs(grouped=True))
    def test_my_attention(example):
        q, k, v = example.args
        ...
"""
from __future__ import annotations

from .needs import require_hypothesis

require_hypothesis("npformer.testing.strategies")     # one line naming the extra, before hypothesis is imported

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .example import Example

IGNORE_INDEX = -100


# -- building blocks ------------------------------------------------------------------------
def values():
    """A float: an odd multiple of 1/8 in [-15/8, 15/8] (never 0)."""
    return st.integers(-8, 7).map(lambda i: (2 * i + 1) / 8)


def arrays(shape):
    """A float64 array of ``values()``."""
    return hnp.arrays(np.float64, tuple(shape), elements=values())


def size(low=1, high=4):
    """A positive dimension, shrinking towards ``low``."""
    return st.integers(low, high)


@st.composite
def head_groups(draw, grouped=True, max_kv=2, max_group=3):
    """(H, H_kv): H query heads over H_kv key/value heads, H a multiple of H_kv (H_kv = H
    when not ``grouped``; H_kv = 1 is multi-query attention)."""
    H_kv = draw(st.integers(1, max_kv))
    group = draw(st.integers(1, max_group)) if grouped else 1
    return H_kv * group, H_kv


@st.composite
def lengths(draw, B, N):
    """Real tokens per sequence, [B] in [0, N] (0: nothing to read)."""
    return np.array(draw(st.lists(st.integers(0, N), min_size=B, max_size=B)))


@st.composite
def shapes_into(draw, shape):
    """A shape that broadcasts to ``shape`` without growing it: its last axes, each 1 or equal."""
    count = draw(st.integers(1, len(shape)))
    return tuple(draw(st.sampled_from([1, n])) for n in shape[len(shape) - count:])


MASK_SHAPES = ("none", "key padding [B, 1, 1, M]", "table [N, M]", "per head [H, N, M]",
               "per sequence [B, 1, N, M]", "full [B, H, N, M]")


@st.composite
def masks(draw, B, H, N, M, shapes=MASK_SHAPES):
    """A boolean "may read" mask that broadcasts to [B, H, N, M], or None; left or right
    padding, or any pattern (rows with no readable key included)."""
    kind = draw(st.sampled_from(shapes))
    if kind == "none":
        return None
    if kind.startswith("key padding"):
        real = draw(lengths(B, M))
        keys = np.arange(M)[None, :]
        left = draw(st.booleans())
        table = keys >= M - real[:, None] if left else keys < real[:, None]
        return table[:, None, None, :]
    shape = {"table [N, M]": (N, M), "per head [H, N, M]": (H, N, M),
             "per sequence [B, 1, N, M]": (B, 1, N, M), "full [B, H, N, M]": (B, H, N, M)}[kind]
    return draw(hnp.arrays(bool, shape))


@st.composite
def causal_options(draw, M):
    """{"causal": bool, "window": None or 1..M} (a window only with causal)."""
    causal = draw(st.booleans())
    window = draw(st.one_of(st.none(), st.integers(1, M))) if causal else None
    return {"causal": causal, "window": window}


@st.composite
def positions(draw, B, N, per_row=None):
    """Integer positions [N] or [B, N], starting at an offset (as after cached tokens)."""
    per_row = draw(st.booleans()) if per_row is None else per_row
    if per_row:
        starts = np.array(draw(st.lists(st.integers(0, 6), min_size=B, max_size=B)))
        return starts[:, None] + np.arange(N)[None, :]
    return draw(st.integers(0, 6)) + np.arange(N)


@st.composite
def targets(draw, shape, V):
    """Target ids of ``shape`` in [0, V), some of them IGNORE_INDEX (possibly all)."""
    ids = draw(hnp.arrays(np.int64, shape, elements=st.integers(0, V - 1)))
    ignored = draw(hnp.arrays(bool, shape))
    return np.where(ignored, IGNORE_INDEX, ids)


# -- whole inputs of the components (npformer.testing.components) ---------------------------
@st.composite
def elementwise_inputs(draw):
    """x [B, N, d] for an activation."""
    shape = (draw(size(1, 2)), draw(size(1, 3)), draw(size(1, 4)))
    return Example(("x",), (draw(arrays(shape)),))


@st.composite
def softmax_inputs(draw, with_mask=True):
    """x of 1 to 3 axes, an ``axis`` among them, and (with_mask) a mask that broadcasts."""
    shape = tuple(draw(st.lists(size(1, 4), min_size=1, max_size=3)))
    x = draw(arrays(shape))
    axis = draw(st.sampled_from([-1] + list(range(len(shape)))))
    options = {"axis": axis}
    if with_mask and draw(st.booleans()):
        options["mask"] = draw(hnp.arrays(bool, draw(shapes_into(shape))))
    return Example(("x",), (x,), options)


@st.composite
def leading_axes(draw):
    """The axes before the features: [N], [B, N] or [B, H, N] (rows, sequences, heads)."""
    return tuple(draw(st.lists(size(1, 3), min_size=1, max_size=3)))


@st.composite
def linear_inputs(draw):
    """x [..., d_in] (one to three leading axes), weight [d_in, d_out], and a bias [d_out] or none."""
    lead, d_in, d_out = draw(leading_axes()), draw(size(1, 4)), draw(size(1, 4))
    args = (draw(arrays(lead + (d_in,))), draw(arrays((d_in, d_out))))
    names = ("x", "weight")
    if draw(st.booleans()):
        args, names = args + (draw(arrays((d_out,))),), names + ("bias",)
    return Example(names, args)


@st.composite
def norm_inputs(draw, centred=True):
    """x [..., d] (one to three leading axes), gamma [d] (and beta [d] for LayerNorm)."""
    lead, d = draw(leading_axes()), draw(size(1, 5))
    args = (draw(arrays(lead + (d,))), draw(arrays((d,))))
    names = ("x", "gamma")
    if centred:
        args, names = args + (draw(arrays((d,))),), names + ("beta",)
    return Example(names, args)


@st.composite
def attention_inputs(draw, grouped=False):
    """q [B, H, N, D], k and v [B, H_kv, M, D] (M >= N: the queries are the last N of M
    positions), a mask of any broadcasting shape, causal and window options."""
    B, N, D = draw(size(1, 2)), draw(size(1, 4)), draw(size(1, 3))
    H, H_kv = draw(head_groups(grouped))
    M = N + draw(st.integers(0, 2))
    args = (draw(arrays((B, H, N, D))), draw(arrays((B, H_kv, M, D))), draw(arrays((B, H_kv, M, D))))
    options = {"mask": draw(masks(B, H, N, M)), **draw(causal_options(M))}
    if draw(st.booleans()):
        options["scale"] = draw(st.sampled_from([0.5, 2.0]))       # a scale of one's own
    return Example(("q", "k", "v"), args, options)


@st.composite
def flash_inputs(draw):
    """``attention_inputs`` (grouped, queries after cached keys, causal and windowed) and a
    ``block_size`` of 1 to 3 keys, so that several blocks and a last partial one are read."""
    example = draw(attention_inputs(grouped=True))
    return Example(example.names, example.args, {**example.options, "block_size": draw(st.integers(1, 3))})


@st.composite
def rope_inputs(draw):
    """x [B, H, N, D] (D even), positions [N] or [B, N] with an offset, a base and a layout."""
    B, H, N, D = draw(size(1, 2)), draw(size(1, 2)), draw(size(1, 4)), 2 * draw(size(1, 3))
    options = {"base": draw(st.sampled_from([10000.0, 100.0])),
               "layout": draw(st.sampled_from(["half", "interleaved"]))}
    return Example(("x", "positions"), (draw(arrays((B, H, N, D))), draw(positions(B, N))), options)


@st.composite
def cross_entropy_inputs(draw):
    """logits [B, N, V] and targets [B, N] (some of them IGNORE_INDEX)."""
    B, N, V = draw(size(1, 2)), draw(size(1, 3)), draw(size(2, 5))
    return Example(("logits", "targets"), (draw(arrays((B, N, V))), draw(targets((B, N), V))))


@st.composite
def embedding_inputs(draw):
    """ids [B, N] in [0, V) (small V, so ids repeat) and a table [V, d]."""
    B, N, V, d = draw(size(1, 2)), draw(size(1, 4)), draw(size(1, 4)), draw(size(1, 3))
    ids = draw(hnp.arrays(np.int64, (B, N), elements=st.integers(0, V - 1)))
    return Example(("ids", "table"), (ids, draw(arrays((V, d)))))


@st.composite
def multi_head_inputs(draw, grouped=True):
    """x [B, N, d] and the projections w_q [d, H D], w_k and w_v [d, H_kv D], w_o [H D, d]
    with d = H D; ``n_heads``; a key padding mask [B, 1, 1, N] or none; causal or not."""
    B, N, D = draw(size(1, 2)), draw(size(1, 4)), draw(size(1, 2))
    H, H_kv = draw(head_groups(grouped))
    d = H * D
    args = (draw(arrays((B, N, d))), draw(arrays((d, H * D))), draw(arrays((d, H_kv * D))),
            draw(arrays((d, H_kv * D))), draw(arrays((H * D, d))), H)
    options = {"mask": draw(masks(B, H, N, N, ("none", "key padding [B, 1, 1, M]"))),
               "causal": draw(st.booleans())}
    return Example(("x", "w_q", "w_k", "w_v", "w_o", "n_heads"), args, options)


@st.composite
def swiglu_inputs(draw):
    """x [B, N, d], w_gate and w_up [d, hidden], w_down [hidden, d]."""
    B, N, d, hidden = draw(size(1, 2)), draw(size(1, 3)), draw(size(1, 3)), draw(size(1, 4))
    args = (draw(arrays((B, N, d))), draw(arrays((d, hidden))), draw(arrays((d, hidden))),
            draw(arrays((hidden, d))))
    return Example(("x", "w_gate", "w_up", "w_down"), args)


@st.composite
def adamw_inputs(draw):
    """One parameter's data, grad, moments m and v (v >= 0), the step (1, 2, ...) and the
    settings lr, betas, eps, weight_decay."""
    shape = (draw(size(1, 3)), draw(size(1, 3)))
    data, grad, m = draw(arrays(shape)), draw(arrays(shape)), draw(arrays(shape))
    v = np.abs(draw(arrays(shape)))
    step = draw(st.integers(1, 5))
    options = {"lr": draw(st.sampled_from([0.1, 1e-3])), "betas": draw(st.sampled_from([(0.9, 0.999), (0.8, 0.95)])),
               "eps": 1e-8, "weight_decay": draw(st.sampled_from([0.0, 0.1]))}
    return Example(("data", "grad", "m", "v", "step"), (data, grad, m, v, step), options)


@st.composite
def decode_inputs(draw):
    """A whole sequence's q [B, H, N, D], k and v [B, H_kv, N, D] (GQA included): decoded one
    position at a time through a KV cache, it must give causal attention over all N."""
    B, N, D = draw(size(1, 2)), draw(size(1, 5)), draw(size(1, 3))
    H, H_kv = draw(head_groups(True))
    args = (draw(arrays((B, H, N, D))), draw(arrays((B, H_kv, N, D))), draw(arrays((B, H_kv, N, D))))
    return Example(("q", "k", "v"), args)


def _normal(rng, *shape):
    return rng.standard_normal(shape)


def corner_examples(component):
    """A few fixed inputs of ``component`` that reach its every branch: masks of several shapes
    with a row that reads nothing, causal windows shorter than the sequence behind cached keys,
    GQA groups, both RoPE layouts, ignored targets, repeated ids."""
    rng = np.random.default_rng(11)
    build = _CORNERS.get(component)
    return build(rng) if build else []


def _attention_corners(rng, grouped):
    B, N, M, D = 2, 4, 6, 3
    H, H_kv = (4, 2) if grouped else (2, 2)
    q, k, v = _normal(rng, B, H, N, D), _normal(rng, B, H_kv, M, D), _normal(rng, B, H_kv, M, D)
    left = (np.arange(M)[None, :] >= np.array([[2], [0]]))[:, None, None, :]      # left padding
    table = rng.random((N, M)) < 0.6
    table[1] = False                                                             # reads nothing
    names = ("q", "k", "v")
    own = (_normal(rng, B, H_kv, N, D), _normal(rng, B, H_kv, N, D))     # self-attention: M = N
    return [Example(names, (q, k, v), {"mask": left, "causal": True, "window": 2, "scale": 0.7}),
            Example(names, (q, k, v), {"mask": table, "causal": False, "window": None}),
            Example(names, (q, k, v), {"mask": None, "causal": True, "window": None}),
            Example(names, (q,) + own, {"mask": None, "causal": False, "window": None})]


def _softmax_corners(rng):
    x = _normal(rng, 2, 3, 4)
    mask = rng.random((2, 3, 4)) < 0.6
    mask[0, 1] = False
    far = np.array([[1000.0, 999.0, 998.5], [-1000.0, -999.0, -1001.0]])      # rows far apart
    return [Example(("x",), (x,), {"axis": -1, "mask": mask}),
            Example(("x",), (x,), {"axis": 1, "mask": mask[:, :, :1]}),
            Example(("x",), (x,), {"axis": 0}), Example(("x",), (far,), {"axis": -1})]


def _norm_corners(rng, centred):
    names = ("x", "gamma", "beta") if centred else ("x", "gamma")
    params = (1 + 0.5 * _normal(rng, 5),) + ((_normal(rng, 5),) if centred else ())
    return [Example(names, (_normal(rng, 2, 3, 5),) + params), Example(names, (_normal(rng, 4, 5),) + params)]


def _rope_corners(rng):
    x = _normal(rng, 2, 2, 3, 6)
    return [Example(("x", "positions"), (x, np.array([[0, 1, 2], [4, 5, 6]])), {"base": 100.0, "layout": layout})
            for layout in ("half", "interleaved")]


def _cross_entropy_corners(rng):
    targets = rng.integers(0, 5, (2, 3))
    targets[0, 1] = IGNORE_INDEX
    huge = 800.0 * _normal(rng, 2, 3, 5)                     # logits far beyond exp's range
    return [Example(("logits", "targets"), (_normal(rng, 2, 3, 5), targets)),
            Example(("logits", "targets"), (huge, targets))]


def _multi_head_corners(rng):
    B, N, D, H, H_kv = 2, 4, 2, 4, 2
    d = H * D
    args = (_normal(rng, B, N, d), _normal(rng, d, H * D), _normal(rng, d, H_kv * D), _normal(rng, d, H_kv * D),
            _normal(rng, H * D, d), H)
    pad = (np.arange(N)[None, :] < np.array([[3], [4]]))[:, None, None, :]
    names = ("x", "w_q", "w_k", "w_v", "w_o", "n_heads")
    return [Example(names, args, {"mask": pad, "causal": True}), Example(names, args, {"mask": None, "causal": False})]


def _embedding_corners(rng):
    return [Example(("ids", "table"), (np.array([[3, 3, 1], [0, 3, 1]]), _normal(rng, 5, 2)))]


def _linear_corners(rng):
    x, w, b = _normal(rng, 2, 3, 4), _normal(rng, 4, 5), _normal(rng, 5)
    return [Example(("x", "weight", "bias"), (x, w, b)), Example(("x", "weight"), (x, w)),
            Example(("x", "weight", "bias"), (_normal(rng, 5, 4), w, b)),
            Example(("x", "weight", "bias"), (_normal(rng, 2, 2, 3, 4), w, b))]


def _adamw_corners(rng):
    data, grad, m = _normal(rng, 3, 2), _normal(rng, 3, 2), _normal(rng, 3, 2)
    v = np.abs(_normal(rng, 3, 2))
    names, settings = ("data", "grad", "m", "v", "step"), {"lr": 0.1, "betas": (0.9, 0.999), "eps": 1e-8}
    first = (data, 1e-3 * grad, np.zeros_like(m), np.zeros_like(v), 1)        # the first step: v = 0
    return [Example(names, (data, grad, m, v, 3), {**settings, "weight_decay": 0.1}),
            Example(names, first, {**settings, "weight_decay": 0.0})]


def _relu_corners(rng):
    x = _normal(rng, 2, 3, 4)
    x[0, 0, :2] = 0.0                              # exactly 0: the slope there is 0 by convention
    return [Example(("x",), (x,))]


def _log_softmax_corners(rng):
    far = np.array([[1000.0, 999.0, 998.5], [-1000.0, -999.0, -1001.0]])
    return [Example(("x",), (_normal(rng, 2, 3, 4),), {"axis": 1}), Example(("x",), (far,), {"axis": -1})]


def _l2_corners(rng):
    x = _normal(rng, 2, 3, 4)
    x[0, 0] = x[0, 0] * (1e-13 / np.linalg.norm(x[0, 0]))   # shorter than eps = 1e-12: divided by eps
    return [Example(("x",), (x,))]


def _decode_corners(rng):
    return [Example(("q", "k", "v"), (_normal(rng, 2, 4, 5, 3), _normal(rng, 2, 2, 5, 3), _normal(rng, 2, 2, 5, 3)))]


_CORNERS = {
    "softmax": _softmax_corners, "attention": lambda rng: _attention_corners(rng, False),
    "grouped_attention": lambda rng: _attention_corners(rng, True),
    "layernorm": lambda rng: _norm_corners(rng, True), "rmsnorm": lambda rng: _norm_corners(rng, False),
    "rope": _rope_corners, "cross_entropy": _cross_entropy_corners, "multi_head_attention": _multi_head_corners,
    "embedding": _embedding_corners, "linear": _linear_corners, "adamw": _adamw_corners,
    "kv_decode": _decode_corners, "l2_normalize": _l2_corners, "relu": _relu_corners,
    "log_softmax": _log_softmax_corners,
    "flash_attention": lambda rng: [Example(e.names, e.args, {**e.options, "block_size": 2})
                                    for e in _attention_corners(rng, True)],
}
