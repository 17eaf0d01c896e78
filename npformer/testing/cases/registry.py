"""The registry of gradient-check cases and the small helpers the cases share.

``CASES[name](rng, size)`` returns ``(target, inputs, options)`` for ``gradcheck``:
one small, random, float64 problem per public component, in three sizes.
"""
from __future__ import annotations

import numpy as np

CASES = {}


def case(name):
    """Decorator: register ``builder(rng, size) -> (target, inputs, options)`` under ``name``."""
    def register(builder):
        CASES[name] = builder
        return builder
    return register


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
