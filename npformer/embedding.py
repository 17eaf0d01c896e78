"""Token embeddings and position information added to them.

- ``Embedding``: looks up row ``id`` of a [V, d] table; backward scatters the
  gradient back, repeated ids accumulating (``np.add.at``).
- ``LearnedPositions``: the same lookup on a [max_len, d] table of positions.
- ``SinusoidalPositions``: the fixed table PE[p, 2i] = sin(p / 10000^(2i/d)),
  PE[p, 2i+1] = cos(p / 10000^(2i/d)); nothing to learn.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .module import Cache, Module, Parameter, check_ids, init_normal


@dataclass(frozen=True)
class LookupCache(Cache):
    ids: np.ndarray


class Embedding(Module):
    """ids [B, N] (integers in [0, V)) -> vectors [B, N, d]."""

    def __init__(self, vocab_size, d, rng=None, std=0.02, dtype=np.float32):
        self.weight = Parameter(init_normal(rng, (vocab_size, d), std, dtype))

    def forward(self, ids):
        ids = check_ids("ids", ids, self.weight.shape[0])
        return self.weight.data[ids], LookupCache(ids)

    def backward(self, d_out, cache):
        d = self.weight.shape[1]
        np.add.at(self.weight.grad, cache.ids.reshape(-1), d_out.reshape(-1, d))
        return None  # integer ids have no gradient


class LearnedPositions(Embedding):
    """positions [N] or [B, N] (integers in [0, max_len)) -> learned vectors [..., d]."""

    def forward(self, positions):
        positions = np.asarray(positions)
        if positions.size and np.issubdtype(positions.dtype, np.integer) and \
                positions.max() >= self.weight.shape[0]:
            raise ValueError(f"positions: sequence reaches position {positions.max()} but the "
                             f"position table has max_len {self.weight.shape[0]}")
        return super().forward(positions)


def sinusoid_table(max_len, d, base=10000.0):
    """[max_len, d] table: even columns sin(p * w_i), odd columns cos(p * w_i), w_i = base^(-2i/d)."""
    p = np.arange(max_len)[:, None]
    w = base ** (-np.arange(0, d, 2) / d)
    table = np.zeros((max_len, d))
    table[:, 0::2] = np.sin(p * w)
    table[:, 1::2] = np.cos(p * w[: d // 2])
    return table


class SinusoidalPositions(Module):
    """positions -> fixed sinusoid rows [..., d] (Vaswani et al.); no parameters, no gradient."""

    def __init__(self, max_len, d, base=10000.0, dtype=np.float32):
        self.base = base
        self.table = sinusoid_table(max_len, d, base).astype(dtype)

    def _on_dtype_change(self, dtype):
        self.table = self.table.astype(dtype)

    def forward(self, positions):
        positions = np.asarray(positions)
        if positions.size and positions.max() >= len(self.table):
            raise ValueError(f"positions: sequence reaches position {positions.max()} but the "
                             f"sinusoid table has max_len {len(self.table)}")
        positions = check_ids("positions", positions, len(self.table), "max_len")
        return self.table[positions], LookupCache(positions)

    def backward(self, d_out, cache):
        return None


def position_table(kind, max_len, d, rng, std=0.02, dtype=np.float32):
    """The position module a config names: ``LearnedPositions``, ``SinusoidalPositions``,
    or None for "rope" (rotations inside attention) and "none"."""
    if kind == "learned":
        return LearnedPositions(max_len, d, rng, std, dtype)
    if kind == "sinusoidal":
        return SinusoidalPositions(max_len, d, dtype=dtype)
    return None
