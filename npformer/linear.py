"""Linear: y = x W + b, the projection behind Q/K/V, Wo, the FFN and the LM head.

W is stored as [d_in, d_out] so the code reads like the tutorial's ``q = x Wq``.
(PyTorch's nn.Linear stores the transpose; npformer.interop converts.)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .module import Cache, Module, Parameter, check_float, init_normal


@dataclass(frozen=True)
class LinearCache(Cache):
    x: np.ndarray


class Linear(Module):
    """x [..., d_in] -> x W + b [..., d_out]; ``bias=False`` drops b."""

    def __init__(self, d_in, d_out, bias=True, rng=None, std=None, dtype=np.float32):
        std = 1.0 / np.sqrt(d_in) if std is None else std
        self.weight = Parameter(init_normal(rng, (d_in, d_out), std, dtype))
        self.bias = Parameter(np.zeros(d_out, dtype)) if bias else None

    def forward(self, x):
        check_float("x", x, self.weight.dtype)
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError(f"x: expected last dimension {self.weight.shape[0]}, got shape {x.shape}")
        d_in, d_out = self.weight.shape
        # One [rows, d_in] @ [d_in, d_out] GEMM (a 3-d matmul would run one GEMM per batch row).
        y = (x.reshape(-1, d_in) @ self.weight.data).reshape(x.shape[:-1] + (d_out,))
        if self.bias is not None:
            y += self.bias.data
        return y, LinearCache(x)

    def backward(self, d_y, cache):
        x = cache.x
        d_in, d_out = self.weight.shape
        x2, dy2 = x.reshape(-1, d_in), d_y.reshape(-1, d_out)     # [B*N, d_in], [B*N, d_out]
        self.weight.grad += x2.T @ dy2                            # dW = x^T dy
        if self.bias is not None:
            self.bias.grad += np.ones(len(dy2), dy2.dtype) @ dy2  # db = sum over rows
        return (dy2 @ self.weight.data.T).reshape(x.shape)       # dx = dy W^T
