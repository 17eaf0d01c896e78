"""The protocol rule and the corners learners trip on, judged as the grader judges: a backward
that returns the right numbers but writes into what its caller may reuse, a blockwise backward
that forgets the queries come after a cache. Each seeded mistake is not done and says why."""
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from npformer.exercises import catalog
from npformer.testing import conform, protocol

from test_grader import failing, judge_source, key, with_body, fewer_draws  # noqa: F401


def messages(result):
    """Every failure message, note and diagnosis of a judged exercise, as one text."""
    found = []
    for check in failing(result):
        found += [str(check.get("message") or ""), str(check.get("detail") or "")]
        found += [str(n) for n in check.get("notes", [])]
        for tensor in check.get("tensors", []):
            found += [str(tensor.get("message") or "")] + [str(d) for d in tensor.get("diagnoses", [])]
        found += [str(d) for d in check.get("diagnoses", [])]
    return "\n".join(found)


def judged(key, exercise, file, qualname, body, tmp_path):
    source = with_body(Path(key.path(file)).read_text(), qualname, body)
    return judge_source(key, catalog.find(exercise), file, source, tmp_path)


# -- the rule itself, on numbers one can check by hand ------------------------------------------------
def test_a_backward_that_writes_into_d_out_is_caught_and_one_that_copies_is_not():
    d_out, cache, x = np.ones((2, 3)), {"xhat": np.arange(6.0).reshape(2, 3)}, np.zeros((2, 3))

    def in_place(d, c):
        d *= 2.0
        return d

    def copying(d, c):
        return d * 2.0
    returned, wrong = protocol.run_backward(in_place, d_out.copy(), cache, (x,), ("x",))
    assert wrong == protocol.WROTE_D_OUT and (returned == 2.0).all()
    assert protocol.run_backward(copying, d_out.copy(), cache, (x,), ("x",))[1] is None

    def into_cache(d, c):
        c["xhat"][0, 0] = 7.0
        return d
    assert "cache (['xhat'])" in protocol.run_backward(into_cache, d_out, cache, (x,))[1]


# -- (a) LayerNorm backward scaling d_out in place ----------------------------------------------------
LAYERNORM_IN_PLACE = '''
def layernorm_backward(d_out, cache):
    """-> (d_x, d_gamma, d_beta)."""
    xhat, rstd = cache.xhat, cache.rstd
    d_gamma = sum_over_positions(d_out * xhat)
    d_beta = sum_over_positions(d_out)
    d_out *= cache.gamma
    d_xhat = d_out
    d_x = rstd * (d_xhat - d_xhat.mean(axis=-1, keepdims=True)
                  - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))
    return d_x, d_gamma, d_beta
'''


def test_layernorm_backward_writing_into_d_out_is_not_done(key, tmp_path, fewer_draws):
    result = judged(key, "norm", "t08_norm.py", "layernorm_backward", LAYERNORM_IN_PLACE, tmp_path)
    assert failing(result)
    assert protocol.WROTE_D_OUT in messages(result)


def test_conform_reports_the_protocol_rule():
    from npformer import t08_norm
    ns = dict(vars(t08_norm))
    exec(textwrap.dedent(LAYERNORM_IN_PLACE), ns)
    report = conform("layernorm", t08_norm.layernorm_forward, ns["layernorm_backward"], examples=10)
    assert not report.ok
    rule = next(c for c in report.checks if c.name == protocol.RULE)
    assert rule.failure is not None and rule.failure.message == protocol.WROTE_D_OUT
    right = conform("layernorm", t08_norm.layernorm_forward, t08_norm.layernorm_backward, examples=10)
    assert right.ok
