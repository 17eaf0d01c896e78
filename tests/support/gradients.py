"""The finite-difference gradient checks of one concept's cases, for its own test file.

Each concept's test file (``tests/concepts/test_softmax.py`` for ``t03_softmax.py``) runs the cases its
spec declares, so a learner who breaks ``softmax_backward`` and runs that one file sees it
fail. ``tests/verify/test_gradients.py`` checks that every spec with cases has such a file.
"""
import os
import re

import numpy as np
import pytest

import npformer
from npformer.specs import CASES, SPECS
from npformer.testing.gradcheck import assert_gradcheck

TRACKS, SIZES = ("plain", "fast"), (0, 1, 2)
# Whole models take most of the time (finite differences on every parameter of a stack of
# layers). The default run checks each of them in one (size, track), chosen so that every size
# and both tracks come up; the other five combinations run with -m full.
WHOLE_MODELS = sorted(n for n in CASES if n.startswith(("DecoderLM", "Encoder")) and n != "EncoderDecoderBlock")
SAMPLED = {(name, SIZES[i % 3], TRACKS[i % 2]) for i, name in enumerate(WHOLE_MODELS)}


def own_test_file(concept):
    """"t03_softmax.py" -> "concepts/test_softmax.py": where a concept's own tests live, under tests/."""
    return "concepts/test_" + re.sub(r"^t\d\d_", "", os.path.basename(concept))


def cases_of(concept):
    """The gradient-check cases the spec of ``concept`` declares."""
    return next(spec.cases for spec in SPECS if spec.concept == concept)


def gradient_checks(concept):
    """pytest parameters (case, size, track) for every case of ``concept``, as a list (pytest
    deprecates other iterables); a whole model's combinations outside the default sample are
    marked ``full``."""
    return [pytest.param(name, size, track, id=f"{name}-{size}-{track}",
                         marks=[pytest.mark.full] if name in WHOLE_MODELS and (name, size, track) not in SAMPLED
                         else [])
            for name in cases_of(concept) for size in SIZES for track in TRACKS]


def check_gradients(name, size, track):
    """The case's analytic gradients agree with central differences (float64, 1e-6) and no
    float input or parameter was left unchecked."""
    target, inputs, options = CASES[name](np.random.default_rng(100 + size), size)
    with npformer.track(track):
        report = assert_gradcheck(target, *inputs, tol=1e-6, **options)
    float_inputs = [x for x in inputs if np.issubdtype(np.asarray(x).dtype, np.floating)]
    params = target.parameters() if isinstance(target, npformer.Module) else []
    assert len(report.checks) == len(float_inputs) + len(params)
