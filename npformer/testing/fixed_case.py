"""Judging one fixed problem: npformer with some functions patched in, against npformer itself.

The grader's checks of layers (a ``MultiHeadAttention`` with RoPE and GQA, a Pre-Norm block,
the decoder) are the gradient-check cases (``cases.CASES``) at a few sizes, plus variants
that reach every option. ``judge_case`` asks the code under test (a ``computation``: the
learner's functions, here or in their own process) for one, runs npformer's own, compares the
output and every gradient, checks that two backward passes add up in every parameter's
``.grad`` (the parameters npformer's own module has), and when something differs looks for the catalogued mistake that computes the
same numbers (the engine's one matcher, ``diagnosis.matching``), then for a generic diagnosis
(a constant factor, a sign, a transpose, a mask, a sum over the wrong axis). Its verdict is a
``report.CaseVerdict``.
"""
from __future__ import annotations

import math

import numpy as np

from ..specs import CASE_DIAGNOSES
from .compare import abs_tolerance, compare_tensor, data_scale, tolerance
from .computation import Patched
from .diagnosis import matching, same
from .problem import PRECISION, evaluate, is_module, run
from .report import CaseVerdict, CheckResult, Failure


# a fixed case is one more example: judged at the tolerance drawn examples of its precision get
TOL, ATOL = tolerance(PRECISION), abs_tolerance(PRECISION)


def factors_of(build):
    """{name: value} of the constant factors a backward of this problem must not lose."""
    target, inputs, options = build()
    floats = [x for x in inputs if isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.floating)]
    if is_module(target):
        dims = [m.head_dim for m in target.modules() if hasattr(m, "head_dim")]
        if dims:
            return {"1/sqrt(D)": 1 / math.sqrt(dims[0])}
    elif len(floats) >= 3 and floats[0].ndim == 4:          # q, k, v
        return {"1/sqrt(D)": 1 / math.sqrt(floats[0].shape[-1])}
    if len(inputs) == 2 and not np.issubdtype(np.asarray(inputs[1]).dtype, np.floating):
        count = int((np.asarray(inputs[1]) != -100).sum())
        return {"1/count (the mean over counted targets)": 1 / max(count, 1)}
    if floats:
        return {f"1/d (the mean over the {floats[0].shape[-1]} features)": 1 / floats[0].shape[-1]}
    return {}


def _failed(differs):
    """A compare_tensor finding as the failing CheckResult of that output or gradient."""
    name = differs["name"]
    return CheckResult(name, "output" if name.startswith("output") else "gradient", examples=1,
                       failure=Failure(None, differs["message"], diagnoses=differs["diagnoses"],
                                       rel_error=differs.get("rel_error"),
                                       scaled_error=differs.get("scaled_error")))


def mismatches(mine, right, factors):
    """The output and gradients of ``mine`` that differ from ``right``: [failing CheckResult]."""
    found = []
    scale = data_scale(right.data)                 # what a tensor that is 0 in exact arithmetic is judged at
    for name, expected in right.outputs.items():
        differs = compare_tensor(f"output {name}" if name != "out" else "output", mine.outputs.get(name),
                                 expected, factors, TOL, ATOL, scale)
        if differs:
            return [_failed(differs)]           # a wrong forward makes every gradient wrong too
    for name, expected in right.grads.items():
        if expected is None:
            continue
        differs = compare_tensor(f"gradient of {name}", mine.grads.get(name), np.asarray(expected), factors,
                                 TOL, ATOL, scale)
        if differs:
            found.append(_failed(differs))
    return found


def matching_mistakes(build, mine, candidates, upstream, repeat=1):
    """The catalogued mistakes whose result equals ``mine`` on this problem, in order
    (``diagnosis.matching`` on this one example)."""
    return matching(candidates, lambda patches: [evaluate(build, patches, upstream, repeat).outcome()],
                    [mine.outcome()], tol=TOL)


def leak(build, code, upstream, name):
    """A diagnosis when changing the upstream gradient at one position moves ``name``'s
    gradient as ``code`` computes it where the reference's does not move (a sum or mean over
    the wrong axis)."""
    if np.ndim(upstream) < 2:
        return None
    rng = np.random.default_rng(5)
    leading = np.shape(upstream)[:-1]
    for position in [(0,) * len(leading), tuple(n - 1 for n in leading)]:
        moved = np.array(upstream)
        moved[position] += rng.standard_normal(moved.shape[-1])
        changes = []
        for computes in (code, Patched()):
            before, after = computes.evaluate(build, upstream), computes.evaluate(build, moved)
            a, b = before.grads.get(name), after.grads.get(name)
            if a is None or b is None or np.shape(a) != np.shape(b):
                return None
            changes.append(np.abs(b - a) > TOL * max(np.abs(a).max(initial=0), 1e-12))
        stray = changes[0] & ~changes[1]
        if changes[1].any() and stray.any():
            where = tuple(int(i) for i in np.argwhere(stray)[0])
            return (f"a sum or mean over the wrong axis: when only the upstream gradient at {position} "
                    f"changes, your {name} also changes at {where}, which that position cannot reach "
                    f"(check axis= and keepdims=True)")
    return None


def accumulation_note(once, twice, params):
    """A note unless two backward passes leave twice one pass's gradient in the ``.grad`` of
    every parameter in ``params`` (npformer's own module's: the judge knows them)."""
    assigned, other = [], []
    for name in params:
        g = once.grads.get(name)
        g2 = twice.grads.get(name)
        if g is None:
            continue                             # a missing gradient is a mismatch of its own
        if g2 is None or np.allclose(g2, 2 * g, rtol=TOL, atol=ATOL * max(np.abs(g).max(initial=0), 1e-12)):
            continue
        (assigned if g.any() and np.allclose(g2, g, rtol=TOL) else other).append(name)
    if assigned:
        names = " and ".join(f"{n}.grad" for n in assigned)
        return (f"assigned instead of accumulated: after two backward passes {names} "
                f"{'holds' if len(assigned) == 1 else 'hold'} one pass's gradient, not the sum of "
                f"both; write `.grad += ...` (a layer used twice, like a tied head, must receive both)")
    if other:
        return (f"two backward passes should leave exactly twice one gradient in .grad, but "
                f"{', '.join(other)} hold something else: does backward change .grad another way?")
    return None


def judge_case(build, code, candidates=(), deferred=()):
    """Everything about one problem as ``code`` (a computation) computes it: a ``CaseVerdict``
    (what differs, the protocol's notes, the error raised, the mistake). The upstream gradient
    is random everywhere (a case's own, made for finite differences, may be zero where the
    backward has choices to make). ``deferred``: the structural mistakes, asked only when
    ``mistakes.agreeing_mistakes`` needs them."""
    right = run(build, own_upstream=False)
    if right.error is not None:                      # an upstream of a required form (MoE's aux
        right = run(build)                           # entry): the case's own
    if right.error is not None:                      # the case itself cannot run: npformer's bug
        raise right.error
    mine = code.evaluate(build, right.upstream)
    verdict = CaseVerdict(error=mine.error)
    if mine.error is not None:                       # a catalogued mistake may raise the same error
        verdict.matches = matching_mistakes(build, mine, candidates, right.upstream)
        verdict.mistake = verdict.matches[0] if verdict.matches else None
        if deferred:
            verdict.deferred = lambda: matching_mistakes(build, mine, deferred, right.upstream)
        return verdict
    verdict.checks = mismatches(mine, right, factors_of(build))
    # the protocol is its own verdict: right numbers, so no catalogued mistake is looked for
    wrote = mine.protocol if mine.protocol and not right.protocol else None
    repeat = 1
    if not verdict.checks and is_module(build()[0]):
        twice, right_twice = code.evaluate(build, right.upstream, 2), run(build, right.upstream, 2)
        note = accumulation_note(mine, twice, right.params) \
            if not same(twice.outcome(), right_twice.outcome(), TOL) else None
        if note:
            verdict.notes.append(note)
            mine, repeat = twice, 2
    if verdict.checks or verdict.notes:
        verdict.matches = matching_mistakes(build, mine, candidates, right.upstream, repeat)
        verdict.mistake = verdict.matches[0] if verdict.matches else None
        if deferred:
            verdict.deferred = lambda: matching_mistakes(build, mine, deferred, right.upstream, repeat)
        if verdict.mistake is None:
            _generic(verdict, build, code, right.upstream)
    if wrote:
        verdict.notes.append(wrote)
    return verdict


def case_diagnoses(build, code, upstream):
    """What the concepts' specs say of a failing case (``spec.case_diagnosis``: the MoE's, of a
    router that learns from the outputs and of padding in its aux loss)."""
    target, _, options = build()
    found = []
    for diagnose in CASE_DIAGNOSES:
        found += diagnose(target, options, upstream, lambda u: code.evaluate(build, u),
                          lambda u: evaluate(build, None, u))
    return found


def _generic(verdict, build, code, upstream):
    named = case_diagnoses(build, code, upstream) if verdict.checks else []
    for check in verdict.checks:
        failure = check.failure
        if failure.diagnoses or not check.name.startswith("gradient of "):
            continue
        if named:
            failure.diagnoses = list(named)
            continue
        found = leak(build, code, upstream, check.name[len("gradient of "):])
        failure.diagnoses = [found] if found else []

