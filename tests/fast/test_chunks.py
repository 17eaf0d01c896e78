"""Elementwise chains in chunks: the fast twins of GELU, SiLU and the SwiGLU gate run each row
block a few rows at a time (``npformer.fast.functional.in_chunks``), and equal the plain
functions on every drawn input when the chunks are as small as one row."""
import pytest
from hypothesis import given, settings

import npformer.fast.functional as functional

from support.twin_check import check_twins
from support.twin_pairs import CASES


@pytest.mark.parametrize("elements", [1, 5])
@pytest.mark.parametrize("pair", ["gelu_tanh", "silu", "swiglu_gate"])
def test_chunks_of_a_row_or_two_equal_the_plain_functions(pair, elements, monkeypatch):
    monkeypatch.setattr(functional, "CHUNK", elements)
    settings(max_examples=150)(given(CASES[pair])(check_twins))()
