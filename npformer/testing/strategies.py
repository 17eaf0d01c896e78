"""Hypothesis strategies that know where Transformer code breaks, for your own tests.

Values are odd multiples of 1/8 in [-15/8, 15/8]: never exactly 0 (where ReLU's slope is a
matter of convention), printed short, and shrunk by hypothesis towards +-1/8. Sizes shrink
towards 1. The strategies draw what hand-picked tests miss: a query row with no readable
key, masks of every shape that broadcasts, key/value heads shared by groups of query heads
(GQA), sliding windows together with padding, queries after cached keys, both RoPE pair
layouts and position offsets, ignored targets.

    from hypothesis import given
    from npformer.testing import strategies as nst

    @given(nst.inputs("grouped_attention"))
    def test_my_attention(example):
        q, k, v = example.args
        ...

``inputs(component)`` draws a whole example of one of ``npformer.testing.COMPONENTS`` (as its
spec in ``npformer.specs`` declares it); the pieces below draw parts of one.
"""
from __future__ import annotations

from .needs import require_hypothesis

require_hypothesis("npformer.testing.strategies")     # one line naming the extra, before hypothesis is imported

import numpy as np  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ..specs import CORNERS  # noqa: E402
from ..specs import draw as _draw  # noqa: E402
from .components import component_named  # noqa: E402
from ..specs.example import Example  # noqa: E402,F401

IGNORE_INDEX, MASK_SHAPES = _draw.IGNORE_INDEX, _draw.MASK_SHAPES
values, arrays, size = _draw.values, _draw.arrays, _draw.size
head_groups = st.composite(_draw.head_groups)
lengths = st.composite(_draw.lengths)
masks = st.composite(_draw.mask)
causal_options = st.composite(_draw.causal_options)
positions = st.composite(_draw.positions)
targets = st.composite(_draw.targets)


def inputs(component):
    """The strategy of a whole example (``Example``) of ``component``: its names, arguments and options."""
    return component_named(component).draw


def corner_examples(component):
    """A few fixed inputs of ``component`` that reach its every branch: masks of several shapes
    with a row that reads nothing, causal windows shorter than the sequence behind cached keys,
    GQA groups, both RoPE layouts, ignored targets, repeated ids."""
    build = CORNERS.get(component)
    return build(np.random.default_rng(11)) if build else []
