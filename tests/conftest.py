"""Shared test settings: hypothesis profiles and a seeded generator."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# CI: derandomized, so a red run is reproducible. Locally: explore more examples.
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=40,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=100,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
