"""Shared test settings: hypothesis profiles, a seeded generator, and what did not run.

The main suite (``python -m pytest -q``) leaves the cross-check tier and the rest of the
sampled sets (``-m full``) out, says so at the end, and lists every skipped test with its reason (``-rs`` in pyproject.toml). The tier
itself (``python -m pytest -q -m crosscheck``) refuses to start, in one line naming the
install command, when its packages are missing: skipping every test would read as a pass.
"""
import importlib.util
import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from support import crosscheck_packages

# 40 examples a property, so the main suite stays within minutes on two cores. CI: the same,
# derandomized, so a red run is reproducible. HYPOTHESIS_PROFILE=explore: 200 examples.
settings.register_profile("quick", deadline=None, max_examples=40,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=40,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", deadline=None, max_examples=200,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "quick"))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def crosscheck_asked(config):
    """True when the -m expression selects the cross-check tier (``-m crosscheck``)."""
    return re.search(r"(?<!not )\bcrosscheck\b", config.getoption("markexpr") or "") is not None


def pytest_configure(config):
    """The cross-check tier without its packages: a usage error naming the install command."""
    if not crosscheck_asked(config):
        return
    missing = [name for name in crosscheck_packages.MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise pytest.UsageError(f"the cross-check tier cannot run: {', '.join(missing)} not "
                                f"installed; install its packages with: {crosscheck_packages.INSTALL}")


def pytest_ignore_collect(collection_path, config):
    """tests/crosscheck/ belongs to the cross-check tier only (its modules need torch)."""
    if collection_path.name == "crosscheck" and collection_path.is_dir():
        return not crosscheck_asked(config) or None
    return None


def pytest_collection_modifyitems(config, items):
    """Tests marked slow run first (in their order, the rest after in theirs): with two workers
    the longest start early, and the run does not end waiting on one that began last."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, config):
    """The main suite names the tier it left out (pytest lists the skips after this line)."""
    if not crosscheck_asked(config):
        terminalreporter.write_line("not run here: the cross-check tier against PyTorch and Hugging "
                                    "Face; run it with: python -m pytest -q -m crosscheck")
    if not re.search(r"(?<!not )\bfull\b", config.getoption("markexpr") or ""):
        terminalreporter.write_line("not run here: the rest of the sampled sets (whole-model gradient "
                                    "checks, catalogued mistakes, written alternatives) and the runs of half a "
                                    "minute or more (the demo, the addition task, a benchmark, the wheel, a whole "
                                    "answer key, the notebooks); run it with: python -m pytest -q -n auto -m full")
