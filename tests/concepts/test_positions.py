"""Learned and sinusoidal position tables."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from npformer.t01_embedding import LearnedPositions, SinusoidalPositions, sinusoid_table


def test_sinusoid_table_is_the_formula():
    table = sinusoid_table(7, 6)
    for p in range(7):
        for i in range(3):
            angle = p / 10000 ** (2 * i / 6)
            assert table[p, 2 * i] == pytest.approx(np.sin(angle), abs=1e-15)
            assert table[p, 2 * i + 1] == pytest.approx(np.cos(angle), abs=1e-15)


@given(st.integers(0, 50), st.integers(0, 50))
def test_a_fixed_offset_is_a_rotation_of_each_sin_cos_pair(p, k):
    table = sinusoid_table(101, 8)
    w = 10000 ** (-np.arange(0, 8, 2) / 8)
    for i, wi in enumerate(w):
        rotation = np.array([[np.cos(k * wi), -np.sin(k * wi)], [np.sin(k * wi), np.cos(k * wi)]])
        np.testing.assert_allclose(table[p, 2 * i:2 * i + 2] @ rotation, table[p + k, 2 * i:2 * i + 2],
                                   atol=1e-12)


def test_position_tables_refuse_positions_past_max_len():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="position table has max_len 4"):
        LearnedPositions(4, 2, rng).forward(np.arange(5))
    with pytest.raises(ValueError, match="position table has max_len 4"):
        SinusoidalPositions(4, 2).forward(np.arange(5))


def test_same_token_at_different_positions_gets_different_vectors():
    pos = SinusoidalPositions(8, 4).astype(np.float64)
    rows = pos(np.arange(8))
    assert rows.dtype == np.float64 and len({tuple(r) for r in rows}) == 8
