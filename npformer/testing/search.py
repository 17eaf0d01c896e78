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


def explore(strategy, record, examples, seed, corners=()):
    """Run ``record(example)`` on the corners, then on ``examples`` drawn examples (none shrunk)."""
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
