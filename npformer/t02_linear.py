"""Linear: y = x W + b, the projection behind the article's q = x Wq, k = x Wk, v = x Wv,
the output projection Wo, the FFN's W1 and W2, and the LM head.

W is stored as [d_in, d_out] so the code reads like the article's ``q = x Wq``.
(PyTorch's nn.Linear stores the transpose; npformer.interop converts.)

Backward, for the upstream gradient d_y [..., d_out] (``d_x`` means dL/dx throughout):
    d_x = d_y W^T                           [..., d_in]
    d_W = sum over positions of x^T d_y     [d_in, d_out]
    d_b = sum over positions of d_y         [d_out]

Fast twins: ``linear_forward`` and ``linear_backward`` have drop-in twins in
``npformer/fast/linear.py``, which run only under ``npformer.track("fast")``. By default
the functions written here run: a ``print`` in them shows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .core.module import Cache, Module, Parameter, init_normal
from .core.track import fast_twin
from .core.validate import check_float, check_last_dim, check_positive, check_rng


@dataclass(frozen=True)
class LinearCache(Cache):
    """The input, the weight (only pointed at) and whether there was a bias."""

    x: np.ndarray           # the input [..., d_in]
    weight: np.ndarray      # W [d_in, d_out], only pointed at
    has_bias: bool

    borrowed = ("weight",)


def sum_over_positions(a):
    """[..., F] -> [F]: the sum over every axis but the last (a bias or gain gradient)."""
    return a.reshape(-1, a.shape[-1]).sum(axis=0)


@fast_twin
def linear_forward(x, weight, bias=None):
    """x [..., d_in] @ W [d_in, d_out] (+ b [d_out]) -> y [..., d_out]."""
    y = x @ weight
    if bias is not None:
        y = y + bias
    return y, LinearCache(x, weight, bias is not None)


@fast_twin
def linear_backward(d_out, cache):
    """-> (d_x, d_weight, d_bias); d_bias is None without a bias."""
    x, weight = cache.x, cache.weight
    # forward: y = x @ W + b
    d_x = d_out @ weight.T                                    # [..., d_in]
    x_rows = x.reshape(-1, x.shape[-1])                       # every position is one row: [B*N, d_in]
    d_rows = d_out.reshape(-1, d_out.shape[-1])               # [B*N, d_out]
    d_weight = x_rows.T @ d_rows                              # each position adds x^T d_y
    d_bias = sum_over_positions(d_out) if cache.has_bias else None
    return d_x, d_weight, d_bias


class Linear(Module):
    """x [..., d_in] -> x W + b [..., d_out]; ``bias=False`` drops b.

    W [d_in, d_out] is drawn from N(0, std^2) (std default 1/sqrt(d_in)) with ``rng``, a
    numpy Generator (None: ``np.random.default_rng(0)``); b starts at 0.
    """

    def __init__(self, d_in, d_out, bias=True, rng=None, std=None, dtype=np.float32):
        check_positive("d_in", d_in)
        check_positive("d_out", d_out)
        std = 1.0 / np.sqrt(d_in) if std is None else std
        self.weight = Parameter(init_normal(check_rng(rng), (d_in, d_out), std, dtype))
        self.bias = Parameter(np.zeros(d_out, dtype)) if bias else None

    def forward(self, x):
        """x [..., d_in] -> (x W + b [..., d_out], cache)."""
        check_float("x", x, self.weight.dtype)
        check_last_dim("x", x, self.weight.shape[0])
        return linear_forward(x, self.weight.data, None if self.bias is None else self.bias.data)

    def output_shape(self, cache):
        """[..., d_out]: what backward's d_out must be."""
        return cache.x.shape[:-1] + self.weight.shape[1:]

    def backward(self, d_out, cache):
        """d_x from d_out; adds dW and db into the parameters' gradients."""
        d_x, d_weight, d_bias = linear_backward(d_out, cache)
        self.weight.grad += d_weight
        if self.bias is not None:
            self.bias.grad += d_bias
        return d_x
