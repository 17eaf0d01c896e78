"""The assertions a component's facts (its properties) are written with.

A property, ``check(subject, example)``, runs the implementation under test
(``subject.output(args, options)``, and ``subject.gradients(args, options, d_out)`` when it
has a backward) and raises ``PropertyFailed`` with a one-line account when the fact does not
hold. ``close`` holds code to the precision it computes in (``precision``: float32 code is
judged at float32's, properties included).
"""
from __future__ import annotations

import contextlib
import contextvars

import numpy as np

TOL = 1e-9
_PRECISION = contextvars.ContextVar("property_precision", default=TOL)


@contextlib.contextmanager
def precision(tol):
    """Inside the block every ``close`` allows at least ``tol``: the tolerance of the precision
    the code under test computes in (float32 code is held to float32's, properties included)."""
    token = _PRECISION.set(tol)
    try:
        yield
    finally:
        _PRECISION.reset(token)


class PropertyFailed(AssertionError):
    """A property does not hold; the message says where and by how much."""


# -- small assertions -------------------------------------------------------------------------
def _index(flags):
    return tuple(int(i) for i in np.argwhere(flags)[0])


def close(what, mine, expected, tol=TOL):
    """PropertyFailed unless ``mine`` equals ``expected`` to ``tol`` (``differs``)."""
    found = differs(what, mine, expected, max(tol, _PRECISION.get()))
    if found:
        raise PropertyFailed(found)


def differs(what, mine, expected, tol=TOL):
    """None when ``mine`` equals ``expected`` to ``tol`` (relative to the largest entry, and
    absolute near 0: the one test of closeness of the properties and the claims), else the
    one-line account: a shape that cannot hold ``expected``, NaN or inf, or the worst entry."""
    mine = np.asarray(mine, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if mine.shape != expected.shape and np.broadcast(mine, expected).shape != mine.shape:
        return f"{what}: shape {mine.shape}, expected {expected.shape}"
    expected = np.broadcast_to(expected, mine.shape)
    if not np.isfinite(mine).all():
        return f"{what}: NaN or inf at {_index(~np.isfinite(mine))}"
    scale = max(1.0, float(np.abs(expected).max(initial=0)))
    if mine.size and np.abs(mine - expected).max() > tol * scale:
        worst = np.unravel_index(int(np.argmax(np.abs(mine - expected))), mine.shape)
        yours, right = differing(mine[worst], expected[worst])
        return f"{what}: at {tuple(int(i) for i in worst)} yours is {yours}, expected {right}"
    return None


def differing(a, b):
    """Two numbers as text with enough digits to tell them apart (6 when 6 do)."""
    for digits in range(6, 18):
        if f"{a:.{digits}g}" != f"{b:.{digits}g}":
            return f"{a:.{digits}g}", f"{b:.{digits}g}"
    return f"{a!r}", f"{b!r}"


def zero(what, array):
    """PropertyFailed unless every entry of ``array`` is exactly 0 (and not NaN)."""
    array = np.asarray(array)
    if (array != 0).any():
        at = _index(array != 0)
        raise PropertyFailed(f"{what} must be exactly 0, but at {at} it is {array[at]:.3g}")


def upstream(shape, seed=7):
    """A random upstream gradient of ``shape`` (the same for the same seed)."""
    return np.random.default_rng(seed).standard_normal(shape)


def readable(mask, shape, axis):
    """Which entries may be read (the mask broadcast to ``shape``), and which rows have any."""
    allowed = np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape)
    return allowed, allowed.any(axis=axis, keepdims=True)

