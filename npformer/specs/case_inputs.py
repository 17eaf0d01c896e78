"""What gradient-check cases are built with: three sizes, random numbers, padding masks.

A case, ``builder(rng, size) -> (target, inputs, options)``, is one small float64 problem for
``gradcheck``: ``target`` a Module or a (forward, backward) pair, ``inputs`` its arguments,
``options`` its keyword arguments, at size 0 (tiny), 1 (small) or 2 (wider, more heads).
"""
from __future__ import annotations

import numpy as np


def shape(size):
    """(B, N, d, H) for size 0 (tiny), 1 (small) and 2 (wider, more heads)."""
    return [(1, 3, 4, 2), (2, 5, 8, 2), (2, 4, 12, 4)][size]


def normal(rng, *dims):
    """A float64 array of standard normal draws."""
    return rng.standard_normal(dims)


def real_tokens(B, N):
    """A key mask: real tokens everywhere except the last position of the first row (right padding)."""
    mask = np.ones((B, N), bool)
    mask[0, -1] = False
    return mask


def left_padded(B, N):
    """A key mask: the first position of the first row is padding (left padding)."""
    mask = np.ones((B, N), bool)
    mask[0, 0] = False
    return mask
