"""The usual conventions in which correct code differs from npformer's choices.

Before the engine blames the maths, it runs the reference under each convention of the
component and, when the code agrees with one everywhere, reports "conforms under convention"
instead of a mistake. A convention is either an option value the reference already has
(``layout='interleaved'`` for RoPE) or a variant of the reference (a summed loss, tanh GELU,
a fully masked row given the mean of the values, unbiased variance, eps outside the square
root, an additive finite mask, AdamW without bias correction), each exact, built from
npformer's own functions where they reach.
"""
from __future__ import annotations

import numpy as np

from . import references as ref


def _pair(module, fn):
    return ref.pair(f"{module}.{fn}_forward", f"{module}.{fn}_backward")


# -- variants of the reference ---------------------------------------------------------------
def _gelu(fn):
    def variant():
        return _pair("t06_activations", fn)
    return variant


def _summed_loss():
    forward, backward = _pair("t11_loss", "cross_entropy")

    def summed_forward(logits, targets, ignore_index=-100):
        loss, cache = forward(logits, targets, ignore_index=ignore_index)
        return loss * cache.count, cache

    def summed_backward(d_loss, cache):
        d_logits, none = backward(d_loss * cache.count, cache)
        return d_logits, none
    return summed_forward, summed_backward


def _unbiased_layernorm():
    forward, backward = _pair("t08_norm", "layernorm")

    def unbiased_forward(x, gamma, beta, eps=1e-5):
        # xc / sqrt(var d/(d-1) + eps) = c xc / sqrt(var + eps/c^2...) with c = sqrt((d-1)/d)
        d = x.shape[-1]
        c = np.sqrt((d - 1) / d) if d > 1 else np.nan
        y, cache = forward(x, gamma * c, beta, eps * (d - 1) / d)
        return y, (cache, c)

    def unbiased_backward(d_out, cache):
        inner, c = cache
        d_x, d_gamma, d_beta = backward(d_out, inner)
        return d_x, d_gamma * c, d_beta
    return unbiased_forward, unbiased_backward


def _eps_outside_layernorm():
    from ..t08_norm import sum_over_positions

    def outside_forward(x, gamma, beta, eps=1e-5):
        # xhat = (x - mean) / (std + eps), std = sqrt(var): eps is added after the root
        xc = x - x.mean(axis=-1, keepdims=True)                 # [..., d]
        std = np.sqrt((xc ** 2).mean(axis=-1, keepdims=True))   # [..., 1]
        xhat = xc / (std + eps)
        return gamma * xhat + beta, (xhat, std, eps, gamma)

    def outside_backward(d_out, cache):
        xhat, std, eps, gamma = cache
        d_xhat = d_out * gamma
        # xhat = xc / (std + eps): the direct path, then the one through std = sqrt(mean(xc^2))
        # (d std / d xc = xc / (d std), and xc = xhat (std + eps)); the mean's path removes
        # each row's mean of the sum
        through_std = xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True) / np.where(std > 0, std, np.inf)
        d_x = (d_xhat - d_xhat.mean(axis=-1, keepdims=True)) / (std + eps) - through_std
        return d_x, sum_over_positions(d_out * xhat), sum_over_positions(d_out)
    return outside_forward, outside_backward


def _empty_rows(q, k, v, options):
    from .example import Example
    from .properties.attention import _allowed
    return ~_allowed(Example(("q", "k", "v"), (q, k, v), options)).any(axis=-1)     # [B, H, N]


def _attention_rows(name, fill):
    def variant():
        forward, backward = _pair("t04_attention", name)

        def filled_forward(q, k, v, mask=None, scale=None, causal=False, window=None):
            options = {"mask": mask, "scale": scale, "causal": causal, "window": window}
            out, cache = forward(q, k, v, **options)
            empty = _empty_rows(q, k, v, options)
            group = q.shape[1] // k.shape[1]
            out = out.copy()
            if fill == "nan":
                out[empty] = np.nan
            else:            # a finite fill: every key weighted alike, the mean of the values
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
    return variant


def _softmax_rows(fill):
    def variant():
        forward, backward = _pair("t03_softmax", "softmax")

        def filled_forward(x, axis=-1, mask=None):
            y, cache = forward(x, axis=axis, mask=mask)
            if mask is None:
                return y, (cache, None)
            empty = ~np.broadcast_to(mask, x.shape).any(axis=axis, keepdims=True)
            empty = np.broadcast_to(empty, x.shape)
            y = np.where(empty, np.nan if fill == "nan" else 1.0 / x.shape[axis], y)
            return y, (cache, empty)

        def filled_backward(d_out, cache):
            inner, empty = cache
            d_x = backward(d_out, inner)
            if empty is not None:       # uniform weights do not move with the scores
                d_x = np.where(empty, np.nan if fill == "nan" else 0.0, d_x)
            return d_x
        return filled_forward, filled_backward
    return variant


def _additive_attention(fill):
    """Attention with the mask added to the scores as ``fill`` where a key may not be read
    (scores + mask, the mask 0 or ``fill``): a partly masked row is npformer's, since exp of
    a score near ``fill`` is 0; a fully masked row reads every key, weighted by its scores
    (every score moved by the same ``fill``), rounded as the sum rounds them."""
    def variant():
        from ..t03_softmax import softmax_forward
        from ..t04_attention import AttentionCache, attention_backward, repeat_kv, sum_groups
        from .example import Example
        from .properties.attention import _allowed

        def additive_forward(q, k, v, mask=None, scale=None, causal=False, window=None):
            options = {"mask": mask, "causal": causal, "window": window}
            allowed = _allowed(Example(("q", "k", "v"), (q, k, v), options))    # [B, H, N, M]
            group = q.shape[1] // k.shape[1]
            keys, values = repeat_kv(k, group), repeat_kv(v, group)
            scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else float(scale)
            scores = q @ keys.swapaxes(-1, -2) * scale + np.where(allowed, 0.0, fill)
            weights, softmax = softmax_forward(scores)
            return weights @ values, (AttentionCache(q, keys, values, softmax, scale), group)

        def additive_backward(d_out, cache):
            inner, group = cache
            d_q, d_keys, d_values = attention_backward(d_out, inner)
            return d_q, sum_groups(d_keys, group), sum_groups(d_values, group)
        return additive_forward, additive_backward
    return variant


def _additive_softmax(fill):
    def variant():
        forward, backward = _pair("t03_softmax", "softmax")

        def additive_forward(x, axis=-1, mask=None):
            return forward(x if mask is None else x + np.where(mask, 0.0, fill), axis=axis)
        return additive_forward, backward
    return variant


ADDITIVE_FILLS = ("-1e9", "-1e4", "-1e10")      # the finite values published code adds to masked scores


def _additive(make):
    return [({"mask": f"additive {fill}"}, make(float(fill))) for fill in ADDITIVE_FILLS]


def _adamw_uncorrected():
    from ..training.optim import adamw_update

    def uncorrected(data, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        # lr m / (sqrt(v) + eps) is the corrected update with lr, eps and the decay rescaled
        b1, b2 = betas
        c1, c2 = 1 - b1 ** step, 1 - b2 ** step
        rate = lr * c1 / np.sqrt(c2)
        return adamw_update(data, grad, m, v, step, rate, betas, eps / np.sqrt(c2),
                            weight_decay * lr / rate)
    return uncorrected, None


ROWS = "fully_masked_row"
CONVENTIONS = {      # component: [(the convention, as reported; an option to pin or a variant)]
    "rope": [({"layout": "interleaved"}, None), ({"layout": "half"}, None)],
    "gelu": [({"approximate": "tanh"}, _gelu("gelu_tanh"))],
    "gelu_tanh": [({"approximate": "none"}, _gelu("gelu"))],
    "cross_entropy": [({"reduction": "sum"}, _summed_loss)],
    "layernorm": [({"variance": "unbiased"}, _unbiased_layernorm),
                  ({"eps": "outside sqrt"}, _eps_outside_layernorm)],
    "attention": [({ROWS: "mean of values"}, _attention_rows("attention", "mean")),
                  ({ROWS: "nan"}, _attention_rows("attention", "nan"))] + _additive(_additive_attention),
    "grouped_attention": [({ROWS: "mean of values"}, _attention_rows("grouped_attention", "mean")),
                          ({ROWS: "nan"}, _attention_rows("grouped_attention", "nan"))]
    + _additive(_additive_attention),
    "softmax": [({ROWS: "uniform"}, _softmax_rows("uniform")), ({ROWS: "nan"}, _softmax_rows("nan"))]
    + _additive(_additive_softmax),
    "adamw": [({"bias_correction": False}, _adamw_uncorrected)],
}


def of(component, untaken=()):
    """The conventions to try for ``component``: an option convention only when the code does
    not take that option (code that takes ``layout`` is asked for each layout by name)."""
    return [(said, variant) for said, variant in CONVENTIONS.get(component, [])
            if variant is not None or all(name in untaken for name in said)]


def find(component, convention):
    """(said, variant) for a convention given up front; ValueError naming ``convention``."""
    for said, variant in CONVENTIONS.get(component, []):
        if said == dict(convention):
            return said, variant
    known = "; ".join(describe(s) for s, _ in CONVENTIONS.get(component, [])) or "none"
    raise ValueError(f"convention: expected one of {known} for {component}, got {convention!r}")


def describe(said):
    """ "layout='interleaved'" """
    return ", ".join(f"{k}={v!r}" for k, v in said.items())
