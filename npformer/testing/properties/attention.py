"""Properties of attention (plain and grouped-query), multi-head attention, RoPE and
KV-cached decoding."""
from __future__ import annotations

import math

import numpy as np

from .registry import _upstream, close, prop, zero


def _allowed(example):
    """[B, H, N, M]: which key each query may read (the mask and the causal rule together)."""
    q, k = example.args[0], example.args[1]
    (B, H, N, _), M = q.shape, k.shape[2]
    allowed = np.ones((B, H, N, M), bool)
    mask = example.options.get("mask")
    if mask is not None:
        allowed &= np.broadcast_to(mask, allowed.shape)
    if example.options.get("causal"):
        query, key = np.arange(M - N, M)[:, None], np.arange(M)[None, :]
        reach = key <= query
        window = example.options.get("window")
        if window is not None:
            reach &= key > query - window
        allowed &= reach
    return allowed


def _group(example):
    return example.args[0].shape[1] // example.args[1].shape[1]


def _unread_keys(example):
    """[B, H_kv, M]: keys no query of their group may read."""
    allowed = _allowed(example)                                   # [B, H, N, M]
    B, H, N, M = allowed.shape
    return ~allowed.reshape(B, H // _group(example), _group(example) * N, M).any(axis=2)


READERS = ("mask", "causal", "window")          # what decides which keys a query may read

for _name in ("attention", "grouped_attention"):
    @prop(_name, "keys a query may not read change nothing: new values there leave the output as it was",
          needs_any=READERS)
    def attention_ignores_unreadable_keys(subject, example):
        q, k, v = example.args
        unread = _unread_keys(example)[..., None]                 # [B, H_kv, M, 1]
        if not unread.any():
            return
        out = subject.output(example.args, example.options)
        moved = subject.output((q, np.where(unread, k + 2.5, k), np.where(unread, -v, v)), example.options)
        close("the output after changing the keys and values no query may read", moved, out)

    @prop(_name, "a query with no readable key gives a zero output, not NaN", needs_any=READERS)
    def attention_of_nothing_is_zero(subject, example):
        empty = ~_allowed(example).any(axis=-1)                   # [B, H, N]
        if empty.any():
            out = subject.output(example.args, example.options)
            zero("the output of queries with nothing to read", np.nan_to_num(out[empty], nan=1.0))

    @prop(_name, "keys no query may read get exactly zero gradient in d_k and d_v", needs_backward=True,
          needs_any=READERS)
    def attention_unread_keys_get_no_gradient(subject, example):
        unread = _unread_keys(example)
        if unread.any():
            out = subject.output(example.args, example.options)
            _, d_k, d_v = subject.gradients(example.args, example.options, _upstream(np.shape(out)))
            zero("d_k of unreadable keys", np.nan_to_num(d_k[unread], nan=1.0))
            zero("d_v of unreadable keys", np.nan_to_num(d_v[unread], nan=1.0))

    @prop(_name, "the tutorial's q = [1, 0] with scores 1 and 0 and values [2, 0], [0, 4] gives "
                 "[1.340, 1.321] (keys [1, 0], [0, 1]: our choice, giving its scores)", drawn=False)
    def attention_by_hand(subject, example):
        q = np.array([1.0, 0.0]).reshape(1, 1, 1, 2)
        k = np.array([[1.0, 0.0], [0.0, 1.0]]).reshape(1, 1, 2, 2)
        v = np.array([[2.0, 0.0], [0.0, 4.0]]).reshape(1, 1, 2, 2)
        close("output", subject.output((q, k, v), {})[0, 0, 0], [1.340, 1.321], 1e-3)


@prop("grouped_attention", "a key/value head shared by a group of query heads receives the sum of "
                           "their gradients", needs_backward=True)
def grouped_attention_sums_the_group(subject, example):
    q, k, v = example.args
    group = _group(example)
    if group == 1:
        return
    out = subject.output(example.args, example.options)
    G = _upstream(np.shape(out))
    _, d_k, d_v = subject.gradients(example.args, example.options, G)
    wide = (q, np.repeat(k, group, axis=1), np.repeat(v, group, axis=1))
    _, d_k_wide, d_v_wide = subject.gradients(wide, example.options, G)
    B, H, M, D = d_k_wide.shape
    close("d_k of the shared heads", d_k, d_k_wide.reshape(B, H // group, group, M, D).sum(axis=2))
    close("d_v of the shared heads", d_v, d_v_wide.reshape(B, H // group, group, M, -1).sum(axis=2))


# -- multi-head attention ------------------------------------------------------------------------
@prop("multi_head_attention", "causal: the output at a position does not change when later inputs do",
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


@prop("multi_head_attention", "without positions and masks attention is permutation-equivariant: "
                              "reversing the positions reverses the output")
def multi_head_attention_is_permutation_equivariant(subject, example):
    if example.options.get("causal") or example.options.get("mask") is not None:
        return
    out = subject.output(example.args, example.options)
    reversed_x = example.args[0][:, ::-1].copy()
    close("the output of the reversed input", subject.output((reversed_x,) + example.args[1:],
                                                             example.options), out[:, ::-1])


# -- RoPE --------------------------------------------------------------------------------------------
def _pairs_norms(x, layout):
    half = x.shape[-1] // 2
    a, b = (x[..., :half], x[..., half:]) if layout == "half" else (x[..., 0::2], x[..., 1::2])
    return np.hypot(a, b)


@prop("rope", "a rotation keeps each pair's length")
def rope_keeps_lengths(subject, example):
    x, layout = example.args[0], example.options.get("layout", "half")
    out = subject.output(example.args, example.options)
    close("the lengths of the rotated pairs", _pairs_norms(out, layout), _pairs_norms(x, layout))


@prop("rope", "scores depend only on the offset: shifting every position by 5 changes no q . k")
def rope_scores_depend_on_the_offset(subject, example):
    x, positions = example.args
    rotated = subject.output(example.args, example.options)
    shifted = subject.output((x, positions + 5), example.options)
    close("q . k after shifting every position", shifted @ shifted.swapaxes(-1, -2),
          rotated @ rotated.swapaxes(-1, -2))


@prop("rope", "backward turns the gradient back by the same angles: it keeps each pair's length",
      needs_backward=True)
def rope_backward_is_a_rotation(subject, example):
    x, layout = example.args[0], example.options.get("layout", "half")
    G = _upstream(x.shape)
    d_x = subject.gradients(example.args, example.options, G)[0]
    close("the lengths of the gradient's pairs", _pairs_norms(d_x, layout), _pairs_norms(G, layout))


@prop("rope", "at position 1 with base 1 the first pair turns by 1 radian; its dot with the "
              "unturned pair is cos 1 = 0.5403", drawn=False)
def rope_turns_by_the_angle(subject, example):
    x = np.array([1.0, 0.0]).reshape(1, 1, 1, 2)
    out = subject.output((x, np.array([1])), {"base": 1.0, "layout": "half"})
    close("the turned pair", out.reshape(2), [math.cos(1.0), math.sin(1.0)], 1e-12)


# -- KV-cached decoding ----------------------------------------------------------------------------
@prop("kv_decode", "the output at a position does not change when later keys and values do")
def decoding_never_reads_ahead(subject, example):
    q, k, v = example.args
    if q.shape[2] < 2:
        return
    out = subject.output(example.args, example.options)
    later_k, later_v = k.copy(), v.copy()
    later_k[:, :, -1] += 1.5
    later_v[:, :, -1] += 2.0
    moved = subject.output((q, later_k, later_v), example.options)
    close("the outputs before the last position", np.asarray(moved)[:, :, :-1], np.asarray(out)[:, :, :-1])

