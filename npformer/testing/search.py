"""The two hypothesis searches behind ``conform``: one that stops at the first failing example
and shrinks it (within a bound, so every machine finds the same example), one that only runs
a check on every drawn example."""
from __future__ import annotations

from .needs import require_hypothesis

require_hypothesis("npformer.testing.conform")

from hypothesis import HealthCheck, Phase, Verbosity, given, settings   # noqa: E402
from hypothesis import example as hypothesis_example                    # noqa: E402
from hypothesis import seed as hypothesis_seed                          # noqa: E402

SHRINK_CALLS = 100             # examples hypothesis may try while shrinking one failure


class _Found(Exception):
    """Raised inside a hypothesis search to mark an example as failing."""


class _Enough(BaseException):
    """Raised inside a hypothesis search to stop shrinking (hypothesis lets it through)."""


def search(strategy, failing, examples, seed, corners=()):
    """The smallest example hypothesis can find, within ``SHRINK_CALLS`` tries of shrinking
    (a bound on time that gives the same example on every machine), for which
    ``failing(example)`` is true, or None. ``corners``: examples tried first, whatever
    hypothesis draws (one that fails is shrunk)."""
    found, tries = [], [0]

    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
              phases=(Phase.explicit, Phase.generate, Phase.shrink), verbosity=Verbosity.quiet)
    @given(strategy)
    def probe(example):
        if found:
            tries[0] += 1
            if tries[0] > SHRINK_CALLS:
                raise _Enough
        if failing(example):
            found.append(example)
            raise _Found
    for corner in reversed(corners):
        probe = hypothesis_example(corner)(probe)
    try:
        probe()
    except (_Found, _Enough):
        return found[-1]                  # the last one that failed: the smallest so far
    return None


# (strategy, examples, seed) -> copies of the examples ``explore`` ran ``record`` on, in order
_DRAWN = {}


def explore(strategy, record, examples, seed, corners=(), replay=False):
    """Run ``record(example)`` on the corners, then on ``examples`` drawn examples (none shrunk).
    ``replay``: the same strategy and corners will come again (a component's own, unscoped):
    hypothesis draws the same examples for the same seed whatever ``record`` does, so the
    second time they are taken from memory (copies: code that writes into its inputs spoils
    nothing), without drawing."""
    key = (strategy, examples, seed, tuple(_digest(c) for c in corners))
    if replay and key in _DRAWN:
        for example in _DRAWN[key]:
            record(example.fresh())
        return
    drawn = []

    def keep(example):
        drawn.append(example.fresh())
        record(example)
    _draw_all(strategy, keep if replay else record, examples, seed, corners)
    if replay:
        _DRAWN[key] = drawn


def _digest(example):
    """What tells one corner example from another: its names, and every value's bytes."""
    import hashlib

    import numpy as np
    hashed = hashlib.sha256(repr(example.names).encode())
    for name, value in [("", a) for a in example.args] + sorted(example.options.items()):
        hashed.update(name.encode())
        if isinstance(value, np.ndarray) and value.dtype != object:
            hashed.update(repr((value.dtype.str, value.shape)).encode())
            hashed.update(np.ascontiguousarray(value).tobytes())
        else:
            hashed.update(repr(value).encode())
    return hashed.hexdigest()


def _draw_all(strategy, record, examples, seed, corners):
    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), phases=(Phase.explicit, Phase.generate),
              verbosity=Verbosity.quiet)
    @given(strategy)
    def probe(example):
        record(example)
    for corner in reversed(corners):
        probe = hypothesis_example(corner)(probe)
    probe()
