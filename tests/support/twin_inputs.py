"""What the differential tests feed the twin pairs: inputs drawn from what each plain function
accepts (its validators and its docstring's shapes), in every memory layout.

A draw is a ``Case``: the pair, every parameter of its forward function by name, how to make
the upstream gradient, and how many blocks the fast kernels cut their work into. Shapes,
options, layouts and block splits are drawn by hypothesis (so a failure shrinks to a small
one); the numbers come from a generator seeded by a drawn seed (fast to make).

The declared domain, beyond each function's own checks: the float arrays of one call share
one dtype, float32 or float64 (the modules refuse mixed dtypes: nothing silently upcasts);
the upstream gradient has the output's shape; arguments share no memory with one another
(except in the AdamW update, which draws that too).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st

FLOATS = (np.float64, np.float32)
LAYOUTS = ("C", "F", "transposed", "stepped", "reversed", "broadcast", "repeated")


class Case(NamedTuple):
    """One draw: the pair, its forward's parameters by name, the upstream and the cores."""

    pair: str
    kwargs: dict
    dtype: type
    upstream: str          # the upstream gradient's layout ("scalar kinds" for the loss)
    cores: int             # blocks at most
    min_work: int          # elements of work per block at least
    seed: int


def laid_out(array, kind, rng):
    """The values of ``array`` (those of "broadcast" and "repeated": repeated along one axis)
    in a memory layout: C or Fortran order, a transposed view, a stepped slice, a reversed
    (negative stride) view, a read-only stride-0 broadcast, or a writeable stride-0 view (one
    memory element for a whole axis)."""
    array = np.asarray(array)
    if array.ndim == 0 or kind == "C":
        return np.array(array, order="C")              # (ascontiguousarray makes 0-d 1-d)
    if kind == "F":
        return np.asfortranarray(array)
    if kind == "transposed":
        order = rng.permutation(array.ndim)
        return np.ascontiguousarray(array.transpose(order)).transpose(np.argsort(order))
    if kind == "stepped":
        step = tuple(int(s) for s in rng.integers(1, 4, array.ndim))
        big = np.zeros(tuple(n * s for n, s in zip(array.shape, step)), array.dtype)
        view = big[tuple(slice(None, None, s) for s in step)]
        view[...] = array
        return view
    if kind == "reversed":
        axis = int(rng.integers(array.ndim))
        return np.flip(np.flip(array, axis).copy(), axis)
    if kind == "broadcast":
        axis = int(rng.integers(array.ndim))
        return np.broadcast_to(array.take([0], axis) if array.shape[axis] else array, array.shape)
    if kind == "repeated":
        axis = int(rng.integers(array.ndim))
        strides = tuple(0 if i == axis else s for i, s in enumerate(array.strides))
        return np.lib.stride_tricks.as_strided(array.copy(), array.shape, strides, writeable=True)
    raise ValueError(f"kind: unknown layout {kind!r}")


layouts = st.sampled_from(LAYOUTS)
dtypes = st.sampled_from(FLOATS)
# 100: logits past exp's range in float32 (a softmax shifted by anything but the maximum
# overflows). Not for attention: scores of q.k ~ 100 * 100 * D are resolved in float32 to
# about 1e-3, which exp turns into relative errors past the tolerance on either track.
scales = st.sampled_from([1.0, 0.1, 3.0, 100.0])
narrow_scales = st.sampled_from([1.0, 0.1, 3.0])
seeds = st.integers(0, 2 ** 32 - 1)
cores = st.integers(1, 4)
min_works = st.sampled_from([1, 7, 1 << 17])


def sizes(top):
    """0 .. top, 0 about one draw in 3 * top + 1 (a zero-size axis is drawn, not the usual case)."""
    return st.integers(0, 3 * top).map(lambda n: 0 if n == 0 else 1 + (n - 1) % top)


def shapes(min_dims, max_dims, top=4):
    return st.lists(sizes(top), min_size=min_dims, max_size=max_dims).map(tuple)


def broadcast_partner(shape, data, extra=True):
    """A shape that broadcasts against ``shape``: some axes 1, leading axes dropped or
    (``extra``) one added."""
    own = [1 if data.draw(st.booleans()) else n for n in shape]
    drop = data.draw(st.integers(0, len(own)))
    own = own[drop:]
    if extra and not drop and data.draw(st.integers(0, 3)) == 0:
        own = [data.draw(st.integers(1, 2))] + own
    return tuple(own)


class Maker:
    """Arrays of one dtype from one seeded generator, each in a drawn layout."""

    def __init__(self, data, dtype, seed, scale):
        self.data, self.dtype, self.scale = data, dtype, scale
        self.rng = np.random.default_rng(seed)

    def floats(self, shape, positive=False, layout=None):
        values = self.scale * self.rng.standard_normal(shape)
        values = np.abs(values) if positive else values
        return laid_out(values.astype(self.dtype), layout or self.data.draw(layouts), self.rng)

    def bools(self, shape):
        share = self.data.draw(st.sampled_from([0.8, 0.5, 1.0, 0.0]))
        return laid_out(self.rng.random(shape) < share, self.data.draw(layouts), self.rng)


def case(pair, build, wide=True):
    """A strategy of ``Case``: ``build(data, make) -> forward kwargs`` draws the pair's inputs,
    at scales up to 100 (``wide``) or up to 3."""
    @st.composite
    def strategy(draw):
        data = _Data(draw)
        dtype, seed = draw(dtypes), draw(seeds)
        make = Maker(data, dtype, seed, draw(scales if wide else narrow_scales))
        kwargs = build(data, make)
        return Case(pair, kwargs, dtype, draw(layouts), draw(cores), draw(min_works), seed)
    return strategy()


class _Data:
    """``draw`` under the name ``data.draw`` (the builders read like ``st.data()`` tests)."""

    def __init__(self, draw):
        self.draw = draw
