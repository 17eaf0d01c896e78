"""Each fast twin is its plain function: equal on every input the plain function accepts.

Per pair, hypothesis draws inputs over what the plain function accepts (``twin_pairs``): every
axis argument, every mask shape ``check_mask`` accepts, batch 0, 1 and more, grouped-query
heads and windows, float32 and float64, C, Fortran, transposed, stepped, reversed and
broadcast (read-only) layouts, zero-size axes, one to four blocks of any size; and runs every
route (``twin_check``): plain, fast, and each forward with the other track's backward.

A long run outside pytest: ``python tests/support/twin_long_run.py --draws 5000``.
"""
import inspect
import itertools

import numpy as np
import pytest
from hypothesis import given, settings

from npformer.core.track import twins

from support.twin_check import check_twins, parameters
from support.twin_inputs import Case
from support.twin_pairs import CASES, METHODS, PAIRS, PARAMETERS

DRAWS = 200          # per pair: the CI profile's 40 would seldom reach a rare combination


@pytest.mark.parametrize("pair", sorted(CASES))
def test_the_fast_twin_equals_the_plain_function(pair):
    settings(max_examples=DRAWS)(given(CASES[pair])(check_twins))()


def test_every_twin_pair_is_drawn():
    drawn = {fn.__name__ for forward, backward, _ in PAIRS.values() for fn in (forward, backward) if fn}
    assert drawn == {plain.__name__ for key, (plain, _) in twins().items() if key not in METHODS}


def test_every_parameter_of_a_plain_twin_is_drawn():
    # a parameter added to a plain function fails here until its builder draws it
    for key, (plain, fast) in twins().items():
        if key not in METHODS:
            assert parameters(plain) == PARAMETERS[plain.__name__], key


def test_a_fast_twin_has_its_plain_twins_signature():
    for key, (plain, fast) in twins().items():
        assert inspect.signature(fast) == inspect.signature(plain), key


def _mask_shapes(target):
    """Every shape ``check_mask`` accepts for scores of shape ``target``: 0 to 4 axes, each 1
    or the target's."""
    for ndim in range(len(target) + 1):
        for keep in itertools.product([False, True], repeat=ndim):
            yield tuple(n if k else 1 for n, k in zip(target[len(target) - ndim:], keep))


@pytest.mark.parametrize("cores", [1, 2])
@pytest.mark.parametrize("B", [1, 3])
@pytest.mark.parametrize("pair", ["attention", "grouped_attention", "flash_attention"])
def test_every_mask_shape_on_one_core_and_on_several(pair, B, cores):
    # one sequence (the key/value heads split over the cores) and several (the batch split)
    H_kv, G, N, M, D = 2, 1 if pair == "attention" else 2, 3, 5, 4
    rng = np.random.default_rng([B, cores])
    shapes = list(_mask_shapes((B, H_kv * G, N, M)))
    assert len(shapes) == 31
    for index, shape in enumerate(shapes):
        q, k, v = (rng.standard_normal(s) for s in ((B, H_kv * G, N, D), (B, H_kv, M, D), (B, H_kv, M, D)))
        kwargs = {"q": q, "k": k, "v": v, "mask": rng.random(shape) < 0.7, "scale": None,
                  "causal": bool(index % 2), "window": None}
        if pair == "flash_attention":
            kwargs["block_size"] = 2
        check_twins(Case(pair, kwargs, np.float64, "C", cores, 1, index))


def test_a_fast_kernel_never_writes_into_a_copy():
    # the helpers that give the kernels arrays to write into refuse what only a copy could give
    from npformer.fast.functional import as_rows, view_as
    table = np.zeros((4, 6))
    as_rows(table)[1] = 1
    view_as(table, (2, 2, 6))[0, 1] = 2
    assert table[1].tolist() == [2.0] * 6
    with pytest.raises(ValueError, match="as_rows: expected a C-contiguous array"):
        as_rows(table.T)
    with pytest.raises(ValueError, match="view_as: an array of shape"):
        view_as(table[:, :3], (12,))
    assert as_rows(np.zeros((3, 0, 2))).shape == (0, 2)          # zero-size axes keep their count
    assert as_rows(np.zeros((3, 0))).shape == (3, 0)


@pytest.mark.parametrize("length", [2, 3])
@pytest.mark.parametrize("how", ["read-only", "one element per axis", "m is v", "grad is m", "grad is data"])
def test_adamw_on_arrays_it_cannot_overwrite(how, length):
    # the fast update overwrites data, m and v in place, unless that would change its numbers
    rng = np.random.default_rng(length)
    data, grad, m = (rng.standard_normal((length, 3)) for _ in range(3))
    v = np.abs(rng.standard_normal((length, 3)))
    if how == "read-only":
        data = np.broadcast_to(data[:1], data.shape)
    elif how == "one element per axis":
        data = np.lib.stride_tricks.as_strided(data[:1].copy(), data.shape, (0, 8), writeable=True)
    elif how == "m is v":
        m = v
    else:
        grad = {"grad is m": m, "grad is data": data}[how]
    kwargs = {"data": data, "grad": grad, "m": m, "v": v, "step": 3, "lr": 0.1, "betas": (0.9, 0.99),
              "eps": 1e-8, "weight_decay": 0.1}
    check_twins(Case("adamw_update", kwargs, np.float64, "C", 2, 1, 0))
