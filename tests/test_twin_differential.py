"""Each fast twin is its plain function: equal on every input the plain function accepts.

Per pair, hypothesis draws inputs over what the plain function accepts (``twin_pairs``): every
axis argument, every mask shape ``check_mask`` accepts, batch 0, 1 and more, grouped-query
heads and windows, float32 and float64, C, Fortran, transposed, stepped, reversed and
broadcast (read-only) layouts, zero-size axes, one to four blocks of any size; and runs every
route (``twin_check``): plain, fast, and each forward with the other track's backward.

A long run outside pytest: ``python tests/twin_long_run.py --draws 5000``.
"""
import inspect

import pytest
from hypothesis import given

from npformer.core.track import twins

from twin_check import check_twins, parameters
from twin_pairs import CASES, PAIRS, PARAMETERS


@pytest.mark.parametrize("pair", sorted(CASES))
def test_the_fast_twin_equals_the_plain_function(pair):
    given(CASES[pair])(check_twins)()


def test_every_twin_pair_is_drawn():
    drawn = {fn.__name__ for forward, backward, _ in PAIRS.values() for fn in (forward, backward) if fn}
    assert drawn == {plain.__name__ for plain, _ in twins().values()}


def test_every_parameter_of_a_plain_twin_is_drawn():
    # a parameter added to a plain function fails here until its builder draws it
    for key, (plain, fast) in twins().items():
        assert parameters(plain) == PARAMETERS[plain.__name__], key


def test_a_fast_twin_has_its_plain_twins_signature():
    for key, (plain, fast) in twins().items():
        assert inspect.signature(fast) == inspect.signature(plain), key
