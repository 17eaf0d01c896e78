"""One drawn case run on both tracks and compared; the plain function is the reference.

For a forward/backward pair: the plain forward and backward (the reference); the fast forward
and backward; the plain forward's cache into the fast backward, and the fast forward's cache
into the plain backward (the tracks share their caches). Every output and gradient equals the
reference's: same shape, same dtype, the same NaN and infinite entries, and the rest within
1e-12 (float64) or 1e-5 (float32) of the largest, or of a tenth of the squared input scale
when that is larger (a result that is what is left of cancelling terms carries their rounding).
The fast twins leave their inputs, the upstream gradient and the plain cache as they found
them (the AdamW update alone overwrites ``data``, ``m`` and ``v``, as documented).

An input the plain function refuses (it raises) is not the fast twin's to accept:
the draw is rejected.
"""
from __future__ import annotations

import inspect
import warnings

import numpy as np
from hypothesis import reject

from npformer import track
from npformer.fast.parallel import on_cores

from support.twin_pairs import PAIRS

TOLERANCE = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-5}


def parameters(function):
    """The names of a function's parameters, in order."""
    return tuple(inspect.signature(function).parameters)


def floor_of(values):
    """A tenth of the squared largest finite magnitude among ``values`` (at least 0.1)."""
    largest = 1.0
    for a in values:
        if isinstance(a, np.ndarray) and np.issubdtype(a.dtype, np.floating) and a.size:
            finite = np.abs(a[np.isfinite(a)])
            largest = max(largest, float(finite.max(initial=0)))
    return largest ** 2 / 10


def assert_same(reference, got, floor, what):
    """``got`` equals ``reference`` to the track tolerance (see the module docstring)."""
    if reference is None or got is None:
        assert reference is None and got is None, f"{what}: {reference!r} against {got!r}"
        return
    reference, got = np.asarray(reference), np.asarray(got)
    assert got.shape == reference.shape, f"{what}: shape {got.shape}, expected {reference.shape}"
    assert got.dtype == reference.dtype, f"{what}: dtype {got.dtype}, expected {reference.dtype}"
    finite = np.isfinite(reference)
    assert np.array_equal(finite, np.isfinite(got)), f"{what}: finite entries differ"
    assert np.array_equal(reference[~finite], got[~finite], equal_nan=True), f"{what}: inf/nan differ"
    if not finite.any():
        return
    a, b = reference[finite].astype(np.float64), got[finite].astype(np.float64)
    scale = max(np.abs(a).max(), np.abs(b).max(), floor, np.finfo(np.float64).tiny)
    worst = int(np.argmax(np.abs(a - b)))
    error = float(np.abs(a - b)[worst] / scale)
    assert error <= TOLERANCE[reference.dtype], (
        f"{what}: relative error {error:.2e} > {TOLERANCE[reference.dtype]:.0e} at finite entry "
        f"{worst} ({a[worst]!r} expected, {b[worst]!r} got; scale {scale:.3g})")


def as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


def _plain(call):
    """``call()`` on the plain track; a draw it refuses is rejected."""
    try:
        with track("plain"):
            return call()
    except Exception:                         # the plain function does not accept this input
        reject()


def _snapshot(kwargs):
    return {name: np.array(value, copy=True) for name, value in kwargs.items()
            if isinstance(value, np.ndarray)}


def _assert_unchanged(kwargs, before, what):
    for name, value in before.items():
        assert np.array_equal(kwargs[name], value, equal_nan=True), f"{what} changed its input {name}"


def _upstream(case, out):
    """The upstream gradient: an array of the output's shape and dtype in the case's layout;
    for a scalar loss a Python float, a numpy scalar or a 0-d array."""
    from support.twin_inputs import laid_out
    rng = np.random.default_rng([case.seed, 1])
    out = np.asarray(out)
    if out.ndim == 0 and parameters(PAIRS[case.pair][1])[0] == "d_loss":
        value = float(rng.standard_normal())
        return [value, np.float64(value), out.dtype.type(value), np.array(value, out.dtype)][
            int(rng.integers(4))]
    return laid_out(rng.standard_normal(out.shape).astype(out.dtype), case.upstream, rng)


def check_twins(case):
    """Every route through the pair ``case.pair`` equals the plain one on ``case``."""
    forward, backward, _ = PAIRS[case.pair]
    assert set(case.kwargs) == set(parameters(forward)), f"{case.pair}: not every parameter drawn"
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if backward is None:
            return _check_single(case, forward)
        return _check_pair(case, forward, backward)


def _check_pair(case, forward, backward):
    before = _snapshot(case.kwargs)
    out, cache = _plain(lambda: forward(**case.kwargs))
    upstream = _upstream(case, out)
    upstream_before = np.array(upstream, copy=True)
    name = parameters(backward)[0]

    def back(from_cache):
        return as_tuple(backward(**{name: upstream, "cache": from_cache}))
    grads = _plain(lambda: back(cache))
    with on_cores(case.cores, case.min_work, beside_blas=True), track("fast"):
        fast_out, fast_cache = forward(**case.kwargs)
        routes = {"fast forward, fast backward": back(fast_cache),
                  "plain forward, fast backward": back(cache)}
    with track("plain"):
        routes["fast forward, plain backward"] = back(fast_cache)
        again = back(cache)
    floor = floor_of([*case.kwargs.values(), np.asarray(upstream)])
    assert_same(out, fast_out, floor, f"{case.pair} output")
    for route, fast_grads in routes.items():
        assert len(fast_grads) == len(grads), route
        for i, (p, f) in enumerate(zip(grads, fast_grads)):
            assert_same(p, f, floor, f"{case.pair} gradient {i} ({route})")
    for p, f in zip(grads, again):       # bit for bit: the fast backward left the plain cache alone
        assert p is f is None or np.array_equal(p, f, equal_nan=True), f"{case.pair}: cache changed"
    _assert_unchanged(case.kwargs, before, case.pair)
    assert np.array_equal(upstream, upstream_before, equal_nan=True), f"{case.pair} changed d_out"


def _check_single(case, function):
    """``rotate`` and ``adamw_update``: one call each way."""
    before = _snapshot(case.kwargs)
    expected = as_tuple(_plain(lambda: function(**case.kwargs)))
    _assert_unchanged(case.kwargs, before, case.pair)
    with on_cores(case.cores, case.min_work, beside_blas=True), track("fast"):
        got = as_tuple(function(**case.kwargs))
    floor = floor_of(list(case.kwargs.values()))
    assert len(got) == len(expected), case.pair
    for i, (p, f) in enumerate(zip(expected, got)):
        assert_same(p, f, floor, f"{case.pair} result {i}")
    written = {"data", "m", "v"} if case.pair == "adamw_update" else set()
    written |= {k for k in case.kwargs if any(case.kwargs[k] is case.kwargs[w] for w in written)}
    _assert_unchanged({k: v for k, v in case.kwargs.items() if k not in written},
                      {k: v for k, v in before.items() if k not in written}, case.pair)
