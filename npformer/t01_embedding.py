"""Token embeddings and the position information added to them.

The article adds the two: x_i = token_embedding_i + position_embedding_i, the positions
either learned or built from sines and cosines. Here, with E the [V, d] token table and
P the [max_len, d] position table:

- ``Embedding``: row ``id`` of E for every id, ids [B, N] -> [B, N, d];
- ``LearnedPositions``: the same lookup in P;
- ``SinusoidalPositions``: the fixed table PE[p, 2i] = sin(p / base^(2i/d)),
  PE[p, 2i+1] = cos(p / base^(2i/d)), base = 10000; nothing to learn;
- ``Embeddings``: the input stream, x = E[ids] + P[positions]; its variants add a
  scale, segment rows S (BERT) and a norm: x = norm(scale * E[ids] + S[segments] + P[positions]).

Backward (``d_x`` is the gradient of the loss with respect to x): a lookup sends d_x back
to the rows it read, d_E[id] += d_x at every position holding id, so an id read twice
receives both (``np.add.at``); a ``padding_idx`` row stays frozen (PyTorch's padding_idx).

Fast twin: the lookup's ``backward`` (``Embedding.backward``, which ``LearnedPositions``
inherits) has a drop-in twin in ``npformer/fast/embedding.py``, which runs only under
``npformer.track("fast")``. By default the method written here runs: a ``print`` in it shows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .core.module import Cache, Module, Parameter, init_normal
from .core.track import fast_twin
from .core.validate import (check_eps, check_ids, check_padding_idx, check_positions, check_positive,
                             check_rng)


@dataclass(frozen=True)
class LookupCache(Cache):
    """The ids a lookup read (backward scatters into those rows)."""

    ids: np.ndarray


class Embedding(Module):
    """ids [B, N] (integers in [0, V)) -> vectors [B, N, d], rows of the table E [V, d].

    ``rng``: the Generator E is drawn from (None: ``np.random.default_rng(0)``).
    ``padding_idx``: a row whose gradient stays zero, PyTorch's ``nn.Embedding(padding_idx=...)``
    (BERT's and BART's [PAD] row). The row is still read, and starts at zero; backward
    never adds into it, so gradient steps leave it alone (weight decay, if any, still
    shrinks it, as in PyTorch). Only the lookup skips it: a head tied to this table still
    sends that row its gradient, as in PyTorch.
    """

    def __init__(self, vocab_size, d, rng=None, std=0.02, dtype=np.float32, padding_idx=None):
        check_positive("vocab_size", vocab_size)
        check_positive("d", d)
        self.padding_idx = check_padding_idx("padding_idx", padding_idx, vocab_size)
        table = init_normal(check_rng(rng), (vocab_size, d), std, dtype)
        if self.padding_idx is not None:
            table[self.padding_idx] = 0                  # as torch initialises it
        self.weight = Parameter(table)

    def forward(self, ids):
        """ids [B, N] -> (rows of the table [B, N, d], cache)."""
        ids = check_ids("ids", ids, self.weight.shape[0])
        return self.weight.data[ids], LookupCache(ids)

    @fast_twin
    def backward(self, d_out, cache):
        """Adds d_out into the rows that were read; returns None (ids have no gradient)."""
        # forward: out[b, n] = E[ids[b, n]]; an id read twice receives both gradients
        d = self.weight.shape[1]
        ids, d_rows = cache.ids.reshape(-1), d_out.reshape(-1, d)        # [B*N], [B*N, d]
        if self.padding_idx is not None:
            # the padding row is frozen: the positions that read it send nothing back
            d_rows = np.where((ids == self.padding_idx)[:, None], 0, d_rows)
        np.add.at(self.weight.grad, ids, d_rows)
        return None  # integer ids have no gradient


class LearnedPositions(Embedding):
    """positions [N] or [B, N] (integers in [0, max_len)) -> learned vectors [..., d]."""

    def __init__(self, max_len, d, rng=None, std=0.02, dtype=np.float32):
        super().__init__(check_positive("max_len", max_len), d, rng, std, dtype)

    def forward(self, positions):
        """positions [N] or [B, N] -> (their learned vectors, cache)."""
        return super().forward(check_positions("positions", positions, self.weight.shape[0]))


def sinusoid_table(max_len, d, base=10000.0):
    """[max_len, d] table: even columns sin(p * w_i), odd columns cos(p * w_i), w_i = base^(-2i/d)."""
    check_positive("max_len", max_len)
    check_positive("d", d)
    check_eps("base", base)
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
        """positions [N] or [B, N] -> (their sinusoid rows, cache)."""
        positions = check_positions("positions", positions, len(self.table))
        return self.table[positions], LookupCache(positions)

    def backward(self, d_out, cache):
        """Nothing to learn and integer positions: None."""
        return None


def position_table(kind, max_len, d, rng, std=0.02, dtype=np.float32):
    """The position module a config names: ``LearnedPositions``, ``SinusoidalPositions``,
    or None for "rope" (rotations inside attention) and "none"."""
    if kind == "learned":
        return LearnedPositions(max_len, d, rng, std, dtype)
    if kind == "sinusoidal":
        return SinusoidalPositions(max_len, d, dtype=dtype)
    return None


# -- the input stream -------------------------------------------------------------------
@dataclass(frozen=True)
class EmbeddingsCache(Cache):
    """The caches of the token, segment and position lookups and of the norm."""

    tokens: Cache
    segments: Cache | None
    positions: Cache | None
    norm: Cache | None


class Embeddings(Module):
    """ids [B, N] -> x [B, N, d] = norm(scale * E[ids] + S[segments] + P[positions]).

    ``tokens`` is an ``Embedding``; ``positions`` a position module or None (RoPE, none);
    ``segments`` an ``Embedding`` of segment ids or None; ``norm`` a norm or None. The
    parts belong to the backbone that passes them in, so their parameters keep the
    backbone's names (``tokens.weight``, ``positions.weight`` ...).
    """

    def __init__(self, tokens, positions=None, segments=None, norm=None, scale=1.0):
        self.tokens, self.positions, self.segments, self.norm = tokens, positions, segments, norm
        self.scale = scale

    def forward(self, ids, positions=None, segments=None):
        """``positions`` [N] or [B, N] (default 0..N-1); ``segments`` [B, N] (default all 0)."""
        x, tokens = self.tokens.forward(ids)                             # [B, N, d]
        if self.scale != 1.0:
            x = x * self.scale
        segment_cache = position_cache = norm_cache = None
        if self.segments is not None:
            segments = np.zeros(np.shape(ids), np.int64) if segments is None else segments
            s, segment_cache = self.segments.forward(segments)         # [B, N, d]
            x = x + s
        if self.positions is not None:
            positions = np.arange(np.shape(ids)[-1]) if positions is None else positions
            p, position_cache = self.positions.forward(positions)      # [N, d] or [B, N, d]
            x = x + p
        if self.norm is not None:
            x, norm_cache = self.norm.forward(x)
        return x, EmbeddingsCache(tokens, segment_cache, position_cache, norm_cache)

    def backward(self, d_out, cache):
        """Accumulates into every table's gradient; ids have none, so returns None."""
        d_x = d_out
        if self.norm is not None:
            d_x = self.norm.backward(d_x, cache.norm)
        if self.positions is not None:
            # forward: x = ... + P[positions]; positions [N] are shared by every row of the batch
            shared = cache.positions.ids.ndim == 1
            self.positions.backward(d_x.sum(axis=0) if shared else d_x, cache.positions)
        if self.segments is not None:
            self.segments.backward(d_x, cache.segments)
        # forward: x = scale * E[ids] + ...
        self.tokens.backward(d_x * self.scale if self.scale != 1.0 else d_x, cache.tokens)
        return None
