"""The registry of claims and the small assertions they share.

A claim is a fact the tutorial (or mathematics) states about a component, checked on
the learner's code: ``check(learner, reference) -> detail or None`` raising
``ClaimFailed`` with a one-line account. ``learner`` is the learner's npformer package,
``reference`` the library (for the few claims that compare with it).
"""
from __future__ import annotations

import numpy as np

CLAIMS = {}          # exercise name -> [(text, check), ...] in registration order


class ClaimFailed(AssertionError):
    """A claim does not hold for the learner's code; the message says where and by how much."""


def claim(exercise, text):
    """Decorator: register ``check(learner, reference)`` as a claim of ``exercise``."""
    def register(check):
        CLAIMS.setdefault(exercise, []).append((text, check))
        return check
    return register


def rng():
    """The generator every claim draws from (fixed: a claim's numbers never change)."""
    return np.random.default_rng(7)


def close(what, mine, expected, tol=1e-9):
    """ClaimFailed unless ``mine`` equals ``expected`` to ``tol`` (relative and absolute)."""
    mine, expected = np.asarray(mine, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if mine.shape != expected.shape and np.broadcast(mine, expected).shape != mine.shape:
        raise ClaimFailed(f"{what}: shape {mine.shape}, expected {expected.shape}")
    expected = np.broadcast_to(expected, mine.shape)
    if not np.isfinite(mine).all():
        raise ClaimFailed(f"{what}: NaN or inf at {_index(~np.isfinite(mine))}")
    if not np.allclose(mine, expected, rtol=tol, atol=tol):
        worst = np.unravel_index(int(np.argmax(np.abs(mine - expected))), mine.shape)
        raise ClaimFailed(f"{what}: at {tuple(int(i) for i in worst)} yours is {mine[worst]:.6g}, "
                          f"expected {expected[worst]:.6g}")


def zero(what, array):
    """ClaimFailed unless every entry of ``array`` is exactly 0 (and not NaN)."""
    array = np.asarray(array)
    if (array != 0).any():
        at = _index(array != 0)
        raise ClaimFailed(f"{what} must be exactly 0, but at {at} it is {array[at]:.3g}")


def _index(flags):
    return tuple(int(i) for i in np.argwhere(flags)[0])


def upstream_at(shape, position, generator):
    """An upstream gradient that is random at ``position`` (a tuple of leading indices) and 0 elsewhere."""
    G = np.zeros(shape)
    G[position] = generator.standard_normal(G[position].shape)
    return G
