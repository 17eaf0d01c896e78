"""Attention (``t04_attention.py``), as the engines know it.

Scaled dot-product attention, its grouped-query form (H_kv key/value heads shared by groups of
query heads) and multi-head attention with its projections, as components; the facts the
article states (masked keys change nothing, a query with nothing to read gives zeros, causality,
permutation), the conventions of published code for fully masked rows and additive masks, the
gradient-check cases, what each scope word means for them, exercise 04 and its claims.
Mistakes: ``t04_attention.json``.
"""
from __future__ import annotations

import functools

import numpy as np

from ..t04_attention import (MultiHeadAttention, attention_backward, attention_forward, causal_mask,
                             grouped_attention_backward, grouped_attention_forward, padding_mask)
from ..t05_rope import Rotary
from . import claims
from .draw import Example, arrays, causal_options, head_groups, mask, normal, sampled, size, st
from .facts import close, upstream, zero
from .case_inputs import shape
from .registry import Spec, lookup, pair

spec = Spec("t04_attention.py")
SOFTMAX = ("t03_softmax.softmax_forward", "t03_softmax.softmax_backward")  # what attention runs inside
READERS = ("mask", "causal", "window")          # what decides which keys a query may read
ROWS = "fully_masked_row"


# -- inputs ------------------------------------------------------------------------------------
def attention_inputs(draw, grouped):
    """q [B, H, N, D], k and v [B, H_kv, M, D] (M >= N: the queries are the last N of M
    positions), a mask of any broadcasting shape, causal and window options."""
    B, N, D = draw(size(1, 2)), draw(size(1, 4)), draw(size(1, 3))
    H, H_kv = head_groups(draw, grouped)
    M = N + draw(st().integers(0, 2))
    args = (draw(arrays((B, H, N, D))), draw(arrays((B, H_kv, M, D))), draw(arrays((B, H_kv, M, D))))
    options = {"mask": mask(draw, B, H, N, M), **causal_options(draw, M)}
    if draw(st().booleans()):
        options["scale"] = draw(sampled([0.5, 2.0]))       # a scale of one's own
    return Example(("q", "k", "v"), args, options)


@spec.component("attention", "scaled dot-product attention (every head its own keys)",
                "attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None) -> (out, cache)",
                ("t04_attention.attention_forward", "t04_attention.attention_backward"), "(d_q, d_k, d_v)",
                ("t04_attention.attention_forward", "t04_attention.attention_backward", "t04_attention.may_read")
                + SOFTMAX)
def plain_attention_inputs(draw):
    """``attention_inputs`` with every head its own keys."""
    return attention_inputs(draw, grouped=False)


@spec.component("grouped_attention", "attention with key/value heads shared by groups of query heads (GQA, MQA)",
                "grouped_attention_forward(q, k, v, mask=None, scale=None, causal=False, window=None) "
                "-> (out, cache)",
                ("t04_attention.grouped_attention_forward", "t04_attention.grouped_attention_backward"),
                "(d_q, d_k, d_v)",
                ("t04_attention.grouped_attention_forward", "t04_attention.grouped_attention_backward",
                 "t04_attention.attention_forward", "t04_attention.attention_backward",
                 "t04_attention.may_read") + SOFTMAX)
def grouped_attention_inputs(draw):
    """``attention_inputs`` with groups of query heads sharing key/value heads."""
    return attention_inputs(draw, grouped=True)


def multi_head_forward(x, w_q, w_k, w_v, w_o, n_heads, mask=None, causal=False):
    """x [B, N, d] -> (out [B, N, d], cache): H = n_heads query heads of width D = d / H,
    H_kv = (columns of w_k) / D key/value heads, Wo = w_o; no biases."""
    return _multi_head(x, w_q, w_k, w_v, w_o, n_heads, mask, causal)


def _multi_head(x, w_q, w_k, w_v, w_o, n_heads, mask=None, causal=False, kernel=None):
    """``multi_head_forward`` with the attention ``kernel`` given (npformer's by default)."""
    d = x.shape[-1]
    D = w_q.shape[1] // n_heads
    layer = lookup("t04_attention.MultiHeadAttention")(d, n_heads, w_k.shape[1] // D, rng=np.random.default_rng(0),
                                                        dtype=x.dtype, causal=causal, kernel=kernel)
    layer.qkv.weight.data[...] = np.concatenate([w_q, w_k, w_v], axis=1)
    layer.out.weight.data[...] = w_o
    out, cache = layer.forward(x, mask)
    return out, (layer, cache)


def multi_head_backward(d_out, cache):
    """-> (d_x, d_w_q, d_w_k, d_w_v, d_w_o, None)."""
    layer, inner = cache
    d_x = layer.backward(d_out, inner)
    H_D, kv = layer.n_heads * layer.head_dim, layer.n_kv_heads * layer.head_dim
    d_qkv = layer.qkv.weight.grad
    return d_x, d_qkv[:, :H_D], d_qkv[:, H_D:H_D + kv], d_qkv[:, H_D + kv:], layer.out.weight.grad, None


@spec.component("multi_head_attention", "multi-head attention with Wq, Wk, Wv, Wo (GQA when w_k is narrower)",
                "multi_head_forward(x, w_q, w_k, w_v, w_o, n_heads, mask=None, causal=False) -> (out, cache)",
                (multi_head_forward, multi_head_backward), "(d_x, d_w_q, d_w_k, d_w_v, d_w_o)",
                ("t04_attention.MultiHeadAttention.forward", "t04_attention.MultiHeadAttention.backward",
                 "t04_attention.MultiHeadAttention.split_heads", "t04_attention.MultiHeadAttention.merge_heads",
                 "t04_attention.attention_forward", "t04_attention.attention_backward", "t04_attention.may_read",
                 "t04_attention.grouped_attention_forward", "t04_attention.grouped_attention_backward") + SOFTMAX)
def multi_head_inputs(draw):
    """x [B, N, d] and the projections w_q [d, H D], w_k and w_v [d, H_kv D], w_o [H D, d]
    with d = H D; ``n_heads``; a key padding mask [B, 1, 1, N] or none; causal or not."""
    B, N, D = draw(size(1, 2)), draw(size(1, 4)), draw(size(1, 2))
    H, H_kv = head_groups(draw, True)
    d = H * D
    args = (draw(arrays((B, N, d))), draw(arrays((d, H * D))), draw(arrays((d, H_kv * D))),
            draw(arrays((d, H_kv * D))), draw(arrays((H * D, d))), H)
    options = {"mask": mask(draw, B, H, N, N, ("none", "key padding [B, 1, 1, M]")),
               "causal": draw(st().booleans())}
    return Example(("x", "w_q", "w_k", "w_v", "w_o", "n_heads"), args, options)


def attention_corners(rng, grouped):
    B, N, M, D = 2, 4, 6, 3
    H, H_kv = (4, 2) if grouped else (2, 2)
    q, k, v = normal(rng, B, H, N, D), normal(rng, B, H_kv, M, D), normal(rng, B, H_kv, M, D)
    left = (np.arange(M)[None, :] >= np.array([[2], [0]]))[:, None, None, :]      # left padding
    table = rng.random((N, M)) < 0.6
    table[1] = False                                                             # reads nothing
    names = ("q", "k", "v")
    own = (normal(rng, B, H_kv, N, D), normal(rng, B, H_kv, N, D))     # self-attention: M = N
    return [Example(names, (q, k, v), {"mask": left, "causal": True, "window": 2, "scale": 0.7}),
            Example(names, (q, k, v), {"mask": table, "causal": False, "window": None}),
            Example(names, (q, k, v), {"mask": None, "causal": True, "window": None}),
            Example(names, (q,) + own, {"mask": None, "causal": False, "window": None})]


spec.corners("attention")(lambda rng: attention_corners(rng, False))
spec.corners("grouped_attention")(lambda rng: attention_corners(rng, True))


@spec.corners("multi_head_attention")
def multi_head_corners(rng):
    B, N, D, H, H_kv = 2, 4, 2, 4, 2
    d = H * D
    args = (normal(rng, B, N, d), normal(rng, d, H * D), normal(rng, d, H_kv * D), normal(rng, d, H_kv * D),
            normal(rng, H * D, d), H)
    pad = (np.arange(N)[None, :] < np.array([[3], [4]]))[:, None, None, :]
    left = (np.arange(N)[None, :] >= np.array([[1], [0]]))[:, None, None, :]   # the first query reads nothing
    names = ("x", "w_q", "w_k", "w_v", "w_o", "n_heads")
    return [Example(names, args, {"mask": pad, "causal": True}), Example(names, args, {"mask": None, "causal": False}),
            Example(names, args, {"mask": left, "causal": True})]


# -- facts --------------------------------------------------------------------------------------
@spec.oracle
def allowed(example):
    """[B, H, N, M]: which key each query may read (the mask and the causal rule together)."""
    q, k = example.args[0], example.args[1]
    (B, H, N, _), M = q.shape, k.shape[2]
    found = np.ones((B, H, N, M), bool)
    table = example.options.get("mask")
    if table is not None:
        found &= np.broadcast_to(table, found.shape)
    if example.options.get("causal"):
        query, key = np.arange(M - N, M)[:, None], np.arange(M)[None, :]
        reach = key <= query
        window = example.options.get("window")
        if window is not None:
            reach &= key > query - window
        found &= reach
    return found


def _group(example):
    return example.args[0].shape[1] // example.args[1].shape[1]


def _unread_keys(example):
    """[B, H_kv, M]: keys no query of their group may read."""
    found = allowed(example)                                      # [B, H, N, M]
    B, H, N, M = found.shape
    return ~found.reshape(B, H // _group(example), _group(example) * N, M).any(axis=2)


def attention_ignores_unreadable_keys(subject, example):
    q, k, v = example.args
    unread = _unread_keys(example)[..., None]                 # [B, H_kv, M, 1]
    if not unread.any():
        return
    out = subject.output(example.args, example.options)
    moved = subject.output((q, np.where(unread, k + 2.5, k), np.where(unread, -v, v)), example.options)
    close("the output after changing the keys and values no query may read", moved, out)


def attention_of_nothing_is_zero(subject, example):
    empty = ~allowed(example).any(axis=-1)                    # [B, H, N]
    if empty.any():
        out = subject.output(example.args, example.options)
        zero("the output of queries with nothing to read", np.nan_to_num(out[empty], nan=1.0))


def attention_unread_keys_get_no_gradient(subject, example):
    unread = _unread_keys(example)
    if unread.any():
        out = subject.output(example.args, example.options)
        _, d_k, d_v = subject.gradients(example.args, example.options, upstream(np.shape(out)))
        zero("d_k of unreadable keys", np.nan_to_num(d_k[unread], nan=1.0))
        zero("d_v of unreadable keys", np.nan_to_num(d_v[unread], nan=1.0))


def attention_by_hand(subject, example):
    q = np.array([1.0, 0.0]).reshape(1, 1, 1, 2)
    k = np.array([[1.0, 0.0], [0.0, 1.0]]).reshape(1, 1, 2, 2)
    v = np.array([[2.0, 0.0], [0.0, 4.0]]).reshape(1, 1, 2, 2)
    close("output", subject.output((q, k, v), {})[0, 0, 0], [1.340, 1.321], 1e-3)


for _name in ("attention", "grouped_attention"):
    spec.prop(_name, "keys a query may not read change nothing: new values there leave the output as it was",
              needs_any=READERS)(attention_ignores_unreadable_keys)
    spec.prop(_name, "a query with no readable key gives a zero output, not NaN",
              needs_any=READERS)(attention_of_nothing_is_zero)
    spec.prop(_name, "keys no query may read get exactly zero gradient in d_k and d_v", needs_backward=True,
              needs_any=READERS)(attention_unread_keys_get_no_gradient)
    spec.prop(_name, "the tutorial's q = [1, 0] with scores 1 and 0 and values [2, 0], [0, 4] gives "
                     "[1.340, 1.321] (keys [1, 0], [0, 1]: our choice, giving its scores)", drawn=False)(attention_by_hand)


@spec.prop("grouped_attention", "a key/value head shared by a group of query heads receives the sum of "
                                "their gradients", needs_backward=True)
def grouped_attention_sums_the_group(subject, example):
    q, k, v = example.args
    group = _group(example)
    if group == 1:
        return
    out = subject.output(example.args, example.options)
    G = upstream(np.shape(out))
    _, d_k, d_v = subject.gradients(example.args, example.options, G)
    wide = (q, np.repeat(k, group, axis=1), np.repeat(v, group, axis=1))
    _, d_k_wide, d_v_wide = subject.gradients(wide, example.options, G)
    B, H, M, D = d_k_wide.shape
    close("d_k of the shared heads", d_k, d_k_wide.reshape(B, H // group, group, M, D).sum(axis=2))
    close("d_v of the shared heads", d_v, d_v_wide.reshape(B, H // group, group, M, -1).sum(axis=2))


@spec.prop("multi_head_attention", "causal: the output at a position does not change when later inputs do",
           needs_any=("causal",))
def multi_head_attention_is_causal(subject, example):
    x = example.args[0]
    if not example.options.get("causal") or x.shape[1] < 2:
        return
    out = subject.output(example.args, example.options)
    later = x.copy()
    later[:, -1] += 1.5
    moved = subject.output((later,) + example.args[1:], example.options)
    close("the outputs before the last position", moved[:, :-1], out[:, :-1])


@spec.prop("multi_head_attention", "without positions and masks attention is permutation-equivariant: "
                                   "reversing the positions reverses the output")
def multi_head_attention_is_permutation_equivariant(subject, example):
    if example.options.get("causal") or example.options.get("mask") is not None:
        return
    out = subject.output(example.args, example.options)
    reversed_x = example.args[0][:, ::-1].copy()
    close("the output of the reversed input", subject.output((reversed_x,) + example.args[1:],
                                                             example.options), out[:, ::-1])


# -- what the scope words mean here ------------------------------------------------------------------
for _name in ("attention", "grouped_attention"):
    spec.capability(_name, "no_gqa")(lambda args, options: args[0].shape[1] == args[1].shape[1])
    spec.capability(_name, "even_head_width")(lambda args, options: np.shape(args[0])[-1] % 2 == 0)
    spec.capability(_name, "no_cached_keys")(lambda args, options: args[0].shape[2] == args[1].shape[2])
    spec.capability(_name, "no_fully_masked")(
        lambda args, options: bool(allowed(Example(("q", "k", "v"), tuple(args[:3]), options)).any(axis=-1).all()))
spec.capability("multi_head_attention", "no_gqa")(lambda args, options: args[1].shape[1] == args[2].shape[1])
spec.capability("multi_head_attention", "even_head_width")(lambda args, options: (args[1].shape[1] // args[5]) % 2 == 0)
@spec.capability("multi_head_attention", "no_fully_masked")
def multi_head_reads_something(args, options):
    """True when every query reads a key: the padding mask and the causal rule together."""
    B, N = np.shape(args[0])[:2]
    found = np.ones((B, 1, N, N), bool)
    if options.get("mask") is not None:
        found &= np.broadcast_to(options["mask"], found.shape)
    if options.get("causal"):
        found &= np.tril(np.ones((N, N), bool))
    return bool(found.any(axis=-1).all())


# -- gradient-check cases ------------------------------------------------------------------------
def attention_options(B, N, size):
    """A causal mask with left padding, a causal window, right padding: one per size."""
    return [{"mask": causal_mask(N)[None, None] & padding_mask(np.full(B, N - 1), N, side="left")},
            {"causal": True, "window": 2},
            {"mask": padding_mask(np.full(B, N - 1), N)}][size]


def attention_case(rng, size, grouped):
    """q, k, v of H heads, or (grouped) of H_kv = H / 2 key/value heads, with one mask per size."""
    B, N, d, H = shape(size)
    D, H_kv = d // H, (max(1, H // 2) if grouped else H)
    pair = ((grouped_attention_forward, grouped_attention_backward) if grouped
            else (attention_forward, attention_backward))
    q, k, v = normal(rng, B, H, N, D), normal(rng, B, H_kv, N, D), normal(rng, B, H_kv, N, D)
    return pair, (q, k, v), attention_options(B, N, size)


spec.case("attention")(functools.partial(attention_case, grouped=False))
spec.case("grouped_attention")(functools.partial(attention_case, grouped=True))


@spec.case("MultiHeadAttention")
def multi_head_attention_case(rng, size):
    B, N, d, H = shape(size)
    H_kv = (H, 1, 2)[size]
    rope = Rotary(d // H) if size == 2 else None
    if size == 1:                            # the causal rule inside, a padding mask outside
        return (MultiHeadAttention(d, H, H_kv, bias=True, rng=rng, causal=True),
                (normal(rng, B, N, d),), {"mask": padding_mask(np.full(B, N - 1), N, side="left")})
    return MultiHeadAttention(d, H, H_kv, rope=rope, rng=rng), (normal(rng, B, N, d),), {"mask": causal_mask(N)}


# -- the exercise and its claims ----------------------------------------------------------------
spec.exercise(4, "attention", "scaled dot-product and multi-head attention",
              "tutorial part 1, attention by hand, the mask that stops peeking, and why several heads are not "
              "one computation repeated; tutorial part 2 §6, §7, §8, §9",
              backward=("t04_attention.py:attention_backward", "t04_attention.py:MultiHeadAttention.backward"),
              forward=("t04_attention.py:may_read", "t04_attention.py:attention_forward",
                       "t04_attention.py:MultiHeadAttention.split_heads",
                       "t04_attention.py:MultiHeadAttention.merge_heads"),
              checks=(("MultiHeadAttention", (0, 1, 2)),), components=("attention", "multi_head_attention"))


def _mha(L, g, **options):
    return L.t04_attention.MultiHeadAttention(8, 2, rng=g, dtype=np.float64, **options)


@spec.claim("attention", "causal: the gradient of the output at position 2 reaches no input after it")
def causal_gradient(L, R):
    g = claims.rng()
    mha = _mha(L, g, causal=True)
    out, cache = mha.forward(g.standard_normal((2, 5, 8)))
    claims.zero("d_x after position 2",
                mha.backward(claims.upstream_at(out.shape, (slice(None), 2), g), cache)[:, 3:])


@spec.claim("attention", "without positions or masks attention is permutation-equivariant: permuting "
                         "the positions permutes the input gradient")
def permuted_gradient(L, R):
    g = claims.rng()
    mha = _mha(L, g)
    x, G, order = g.standard_normal((1, 5, 8)), g.standard_normal((1, 5, 8)), g.permutation(5)
    d_x = mha.backward(G, mha.forward(x)[1])
    d_x_permuted = mha.backward(G[:, order], mha.forward(x[:, order])[1])
    claims.close("the gradient of the permuted input", d_x_permuted, d_x[:, order])
