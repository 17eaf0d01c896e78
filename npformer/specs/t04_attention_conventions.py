"""The conventions of published attention code, for the spec of ``t04_attention.py`` (kept in
a file of their own, the spec being long enough).

What a query that reads nothing gives (the mean of the values, NaN), a mask added to the scores
(-1e9 ... Hugging Face's finfo.min), attention without 1/sqrt(D) (T5's, the scale folded into
W_q), in any combination that means something, for attention, grouped attention and multi-head
attention (whose kernel then follows them); and the same unscaled attention inside whole blocks.
"""
from __future__ import annotations

import functools

import numpy as np

from ..t03_softmax import softmax_forward
from ..t04_attention import AttentionCache, attention_backward, repeat_kv, sum_groups
from .draw import Example
from .registry import original, pair
from .t03_softmax import ADDITIVE_FILLS
from .t04_attention import ROWS, _multi_head, allowed, multi_head_backward, spec


# -- conventions: what a fully masked row gives, an additive mask ---------------------------------
def _rows_filled(forward, backward, fill):
    """``forward``, ``backward`` (attention, grouped or not) with a query that reads nothing given
    ``fill``: NaN, or the mean of the values (every key weighted alike, as a finite fill of the
    scores gives)."""
    def filled_forward(q, k, v, mask=None, scale=None, causal=False, window=None):
        options = {"mask": mask, "scale": scale, "causal": causal, "window": window}
        out, cache = forward(q, k, v, **options)
        empty = ~allowed(Example(("q", "k", "v"), (q, k, v), options)).any(axis=-1)     # [B, H, N]
        group = q.shape[1] // k.shape[1]
        out = out.copy()
        if fill == "nan":
            out[empty] = np.nan
        else:
            means = np.repeat(v.mean(axis=2), group, axis=1)[:, :, None, :]     # [B, H, 1, D]
            out[empty] = np.broadcast_to(means, out.shape)[empty]
        return out, (cache, empty, group, v.shape)

    def filled_backward(d_out, cache):
        inner, empty, group, (B, H_kv, M, D) = cache
        d_q, d_k, d_v = (np.array(g, np.float64) for g in backward(d_out, inner))
        if fill == "nan":
            heads = empty.reshape(B, H_kv, group, -1).any(axis=(2, 3))          # [B, H_kv]
            d_q[empty], d_k[heads], d_v[heads] = np.nan, np.nan, np.nan
        else:
            read = (d_out * empty[..., None]).sum(axis=2).reshape(B, H_kv, group, D).sum(axis=2)
            d_v = d_v + read[:, :, None, :] / M
        return d_q, d_k, d_v
    return filled_forward, filled_backward


def _additive(fill):
    """Attention with the mask added to the scores as ``fill`` where a key may not be read
    (scores + mask, the mask 0 or ``fill``): a partly masked row is npformer's, since exp of
    a score near ``fill`` is 0; a fully masked row reads every key, weighted by its scores
    (every score moved by the same ``fill``), rounded as the sum rounds them."""
    def additive_forward(q, k, v, mask=None, scale=None, causal=False, window=None):
        readable = allowed(Example(("q", "k", "v"), (q, k, v), {"mask": mask, "causal": causal, "window": window}))
        group = q.shape[1] // k.shape[1]
        keys, values = repeat_kv(k, group), repeat_kv(v, group)
        scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else float(scale)
        scores = q @ keys.swapaxes(-1, -2) * scale + np.where(readable, 0.0, fill)
        weights, softmax = softmax_forward(scores)
        return weights @ values, (AttentionCache(q, keys, values, softmax, scale), group)

    def additive_backward(d_out, cache):
        inner, group = cache
        d_q, d_keys, d_values = attention_backward(d_out, inner)
        return d_q, sum_groups(d_keys, group), sum_groups(d_values, group)
    return additive_forward, additive_backward


def _unscaled(forward):
    """``forward`` whose scores are not scaled unless a scale is given (T5's attention: the
    1/sqrt(D) is folded into the initialisation of W_q)."""
    def unscaled_forward(q, k, v, mask=None, scale=None, causal=False, window=None):
        return forward(q, k, v, mask, 1.0 if scale is None else scale, causal, window)
    return unscaled_forward


def fill_value(said):
    """The number an additive mask of ``said`` ("additive -1e9", "additive finfo.min") adds."""
    text = said.split()[-1]
    return float(np.finfo(np.float64).min) if text == "finfo.min" else float(text)


def attention_convention(name, said):
    """Attention (``name``: "attention" or "grouped_attention") under ``said``: a fully masked
    row's ``fully_masked_row`` ("mean of values" or "nan"), or the ``mask`` added to the scores
    ("additive -1e9" ... "additive finfo.min", Hugging Face's); and its ``scale`` ("none": T5's,
    folded into W_q). The fill of a fully masked row and an additive mask both say what such a
    row reads: not together."""
    if ROWS in said and "mask" in said:
        return None
    if "mask" in said:
        forward, backward = _additive(fill_value(said["mask"]))
    else:
        forward, backward = pair(f"t04_attention.{name}_forward", f"t04_attention.{name}_backward")
    if ROWS in said:
        forward, backward = _rows_filled(forward, backward, "nan" if said[ROWS] == "nan" else "mean")
    if said.get("scale") == "none":
        forward = _unscaled(forward)
    return forward, backward


CONVENTION_AXES = {ROWS: ("mean of values", "nan"), "mask": tuple(f"additive {f}" for f in ADDITIVE_FILLS),
                   "scale": ("none",)}
for _name in ("attention", "grouped_attention"):
    spec.conventions(_name, CONVENTION_AXES, functools.partial(attention_convention, _name))


class _Kernel:
    """An attention kernel for ``MultiHeadAttention`` made of a (forward, backward) pair."""

    name = "convention"

    def __init__(self, forward, backward):
        self._forward, self._backward = forward, backward

    def forward(self, q, k, v, mask=None, causal=False, window=None):
        return self._forward(q, k, v, mask, None, causal, window)

    def backward(self, d_out, cache):
        return self._backward(d_out, cache)


def multi_head_convention(said):
    """Multi-head attention whose kernel is grouped attention under ``said`` (the same axes)."""
    found = attention_convention("grouped_attention", said)
    if found is None:
        return None
    kernel = _Kernel(*found)

    def convention_forward(x, w_q, w_k, w_v, w_o, n_heads, mask=None, causal=False):
        return _multi_head(x, w_q, w_k, w_v, w_o, n_heads, mask, causal, kernel)
    return convention_forward, multi_head_backward


spec.conventions("multi_head_attention", CONVENTION_AXES, multi_head_convention)


def unscaled_in_modules(chosen):
    """Every attention of a block or model without the 1/sqrt(D) (T5's)."""
    return {"npformer.t04_attention.grouped_attention_forward":
            _unscaled(original("t04_attention.grouped_attention_forward"))}


spec.module_convention({"scale": "none"}, lambda kind, config: not kind.endswith("_mlp"), unscaled_in_modules)
