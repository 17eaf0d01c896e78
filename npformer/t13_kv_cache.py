"""KV cache: keep every layer's keys and values so a new token only computes its own.

Without a cache, generating token t recomputes K and V of all t earlier
positions in every layer; with it, each step projects one new position and
reads the stored ones. Arrays are preallocated to ``capacity`` positions (no
growing per step); ``length`` counts the positions written so far.

With a sliding window, ``LayerKV.extend`` leaves out the keys no new query may read
(``first_readable_key``): attention calls ``kv.extend`` and trims nothing itself.

No fast twins: everything here runs as written on either track (a ``print`` in it shows).
"""
from __future__ import annotations

import numpy as np

from .t04_attention import causal_table
from .core.validate import check_positive


class LayerKV:
    """One layer's slice of a ``KVCache``: k, v [B, H_kv, capacity, D]."""

    def __init__(self, parent, k, v):
        self.parent, self.k, self.v = parent, k, v

    @property
    def length(self):
        """Positions cached so far (shared by every layer)."""
        return self.parent.length

    def write(self, k_new, v_new):
        """Store [B, H_kv, n, D] at positions length..length+n; return all keys/values so far."""
        start, n = self.parent.length, k_new.shape[2]
        self.parent.check_room(n)
        if k_new.shape[:2] + k_new.shape[3:] != self.k.shape[:2] + self.k.shape[3:]:
            raise ValueError(f"kv_cache: built for keys of shape [B, H_kv, *, D] = "
                             f"{self.k.shape[:2] + ('*',) + self.k.shape[3:]}, got {k_new.shape} "
                             f"(a cache from a different model?)")
        self.k[:, :, start:start + n] = k_new
        self.v[:, :, start:start + n] = v_new
        return self.k[:, :, :start + n], self.v[:, :, :start + n]

    def extend(self, k_new, v_new, mask=None, window=None):
        """``write`` the n new positions, then (k, v, mask) of every cached position the n new
        queries may read: with a sliding ``window``, the keys before its reach are left out
        (no query reads them) and the mask [..., M] is cut to match."""
        k, v = self.write(k_new, v_new)
        if window is None:
            return k, v, mask
        first = first_readable_key(k_new.shape[2], k.shape[2], window)
        return k[:, :, first:], v[:, :, first:], None if mask is None else mask[..., first:]


def first_readable_key(n, m, window):
    """The earliest of m keys that any of the last n queries may read (0 without a window):
    KV-cached decoding with a window need not read the keys before it."""
    return int(np.argmax(causal_table(n, m, window).any(axis=0)))


class KVCache:
    """Preallocated keys and values for ``n_layers`` layers.

    ``key_mask`` [B, capacity] records which cached positions are real tokens
    (False at padding), so padding stays masked at every later decode step.
    """

    def __init__(self, n_layers, batch, n_kv_heads, capacity, head_dim, dtype=np.float32):
        for name, size in (("n_layers", n_layers), ("batch", batch), ("n_kv_heads", n_kv_heads),
                           ("capacity", capacity), ("head_dim", head_dim)):
            check_positive(name, size)
        self.capacity, self.length = capacity, 0
        shape = (n_layers, batch, n_kv_heads, capacity, head_dim)
        self.k = np.zeros(shape, dtype)
        self.v = np.zeros(shape, dtype)
        self.key_mask = np.ones((batch, capacity), bool)
        self.layers = [LayerKV(self, self.k[i], self.v[i]) for i in range(n_layers)]

    @property
    def nbytes(self):
        """Bytes held for keys and values: 2 * layers * B * H_kv * capacity * D * itemsize."""
        return self.k.nbytes + self.v.nbytes

    def check_fits(self, n_layers, batch, n_kv_heads, head_dim, dtype):
        """ValueError unless this cache was made for such a model and batch."""
        if (len(self.layers), self.k.shape[1], self.k.shape[2], self.k.shape[4], self.k.dtype) != \
                (n_layers, batch, n_kv_heads, head_dim, np.dtype(dtype)):
            raise ValueError(f"kv_cache: shape {self.k.shape} {self.k.dtype} does not fit this model "
                             f"and batch {batch} (a cache from a different model?)")

    def remember_key_mask(self, key_mask, n):
        """Record which of the next ``n`` positions are real tokens (all, when ``key_mask`` is
        None); returns the key mask [B, length + n] of every position cached so far."""
        if key_mask is not None:
            self.key_mask[:, self.length:self.length + n] = key_mask
        return self.key_mask[:, :self.length + n]

    def check_room(self, n):
        """ValueError unless n more positions fit."""
        if self.length + n > self.capacity:
            raise ValueError(f"kv_cache: a step of {n} positions after {self.length} cached ones "
                             f"exceeds the capacity {self.capacity}")

    def advance(self, n):
        """Count n more positions as written (after every layer wrote them)."""
        self.length += n

    def reset(self):
        """Forget every cached position (the arrays stay allocated)."""
        self.length = 0
        self.key_mask[:] = True
