"""The engine's own seams: one test of sameness, one mistake matcher, one verdict type, and
patches that only the thread which made them sees."""
import threading

import numpy as np

import npformer
from npformer import t02_linear
from npformer.testing.cases import CASES
from npformer.testing.diagnosis import matching, same
from npformer.testing.computation import Patched
from npformer.testing.fixed_case import judge_case
from npformer.testing.mistakes import CATALOGUE
from npformer.testing.patching import _INSTALLED, patched, reference
from npformer.testing.report import CaseVerdict, CheckResult


def _mistake(name):
    return next(m for m in CATALOGUE if m.name == name)


def _linear_problem():
    rng = np.random.default_rng(3)
    x, weight, bias = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5)), rng.standard_normal(5)
    _, cache = t02_linear.linear_forward(x, weight, bias)
    d_out = rng.standard_normal((2, 3, 5))
    return x, d_out, cache


def test_same_compares_errors_by_type_and_message_and_arrays_to_the_tolerance():
    a = {"output": np.array([1.0, 2.0])}
    assert same((a, None), ({"output": np.array([1.0, 2.0 + 1e-9])}, None))
    assert not same((a, None), ({"output": np.array([1.0, 2.1])}, None))
    assert not same((a, None), ({"output": a["output"], "gradient of x": a["output"]}, None))
    assert same(({}, ValueError("x: bad")), ({}, ValueError("x: bad")))
    assert not same(({}, ValueError("x: bad")), ({}, TypeError("x: bad")))
    assert not same((a, None), ({}, ValueError("x")))


def test_matching_names_the_mistake_that_computes_the_same_and_skips_stale_ones():
    x, d_out, cache = _linear_problem()
    transposed, mean = _mistake("linear-weight-transposed"), _mistake("linear-weight-mean-over-rows")

    def compute(patches):
        with patched(patches):
            return [({"gradient of weight": t02_linear.linear_backward(d_out, cache)[1]}, None)]
    rows = x.reshape(-1, 4)
    theirs = [({"gradient of weight": rows.T @ d_out.reshape(-1, 5) / len(rows)}, None)]
    right = compute({})

    class Stale:
        def patches(self):
            raise ValueError("its text changed")
    assert matching([transposed, Stale(), mean], compute, theirs, right) == [mean]
    assert matching([transposed], compute, right, right) == []        # the right numbers are no mistake


def test_a_fixed_case_verdict_is_the_engines_dataclass():
    mistake = _mistake("linear-weight-transposed")
    build = lambda: CASES["linear"](np.random.default_rng(0), 0)          # noqa: E731
    verdict = judge_case(build, Patched(mistake.patches()), [mistake, _mistake("linear-bias-mean")])
    assert isinstance(verdict, CaseVerdict) and not verdict.ok
    assert all(isinstance(c, CheckResult) and c.failure for c in verdict.checks)
    assert "gradient of weight" in [c.name for c in verdict.checks]
    assert verdict.mistake is mistake and verdict.matches == [mistake]
    assert judge_case(build, Patched(), [mistake]).ok


def test_a_patch_is_seen_by_its_own_thread_alone():
    x, d_out, cache = _linear_problem()
    right = x.reshape(-1, 4).T @ d_out.reshape(-1, 5)         # d_W = x^T d_y, summed over positions
    own = t02_linear.linear_backward
    inside, elsewhere, entered, looked = [], [], threading.Event(), threading.Event()

    def patching():
        with patched(_mistake("linear-weight-transposed").patches()):
            inside.append(t02_linear.linear_backward(d_out, cache)[1])
            entered.set()
            looked.wait(10)
            inside.append(npformer.t02_linear.linear_backward(d_out, cache)[1])

    def computing():
        entered.wait(10)
        elsewhere.append(t02_linear.linear_backward(d_out, cache)[1])
        layer = t02_linear.Linear(4, 5, rng=np.random.default_rng(0)).astype(np.float64)
        y, layer_cache = layer.forward(x)
        layer.backward(d_out, layer_cache)
        elsewhere.append(layer.weight.grad)
        looked.set()
    threads = [threading.Thread(target=patching), threading.Thread(target=computing)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert entered.is_set() and looked.is_set()
    assert all(np.allclose(w, right.T) for w in inside) and len(inside) == 2    # the mistake's d_W
    assert all(np.allclose(w, right) for w in elsewhere) and len(elsewhere) == 2
    assert t02_linear.linear_backward is own and not _INSTALLED                # all given back


def test_patches_of_one_table_entry_by_two_threads_come_undone_in_any_order():
    from npformer import t06_activations as act
    own = act.ACTIVATIONS["gelu"]
    plain = reference("npformer.t06_activations.gelu_backward")
    forward_in, backward_in, forward_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def forward_thread():                  # patches the forward, and is the first to finish
        with patched({"npformer.t06_activations.gelu_forward": lambda *a, **k: "forward patched"}):
            forward_in.set()
            backward_in.wait(10)
            seen["forward thread"] = [f() for f in act.ACTIVATIONS["gelu"][:1]]
        forward_out.set()

    def backward_thread():
        forward_in.wait(10)
        with patched({"npformer.t06_activations.gelu_backward": lambda *a, **k: "backward patched"}):
            backward_in.set()
            forward_out.wait(10)
            _, backward = act.ACTIVATIONS["gelu"]
            seen["backward thread"] = [backward(), reference("npformer.t06_activations.gelu_backward")]
            seen["its forward"] = act.ACTIVATIONS["gelu"][0](np.array([0.0]))
    threads = [threading.Thread(target=forward_thread), threading.Thread(target=backward_thread)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen["forward thread"] == ["forward patched"]
    assert seen["backward thread"] == ["backward patched", plain]
    assert not isinstance(seen["its forward"], str)              # npformer's GELU, not the patch
    assert act.ACTIVATIONS["gelu"] == own and not _INSTALLED


def test_a_table_entry_is_given_back_as_the_very_same_object():
    own = npformer.FUNCTION_PAIRS["softmax"]
    with patched({"npformer.t03_softmax.softmax_forward": lambda *a, **k: "forward",
                  "npformer.t03_softmax.softmax_backward": lambda *a, **k: "backward"}):
        forward, backward = npformer.FUNCTION_PAIRS["softmax"]
        assert (forward(), backward()) == ("forward", "backward")
    assert npformer.FUNCTION_PAIRS["softmax"] is own                     # the grader's fingerprint


def _softmax_off_by(factor):
    """Softmax whose output is ``factor`` times the right one, and whose backward is exact for it."""
    def forward(x, axis=-1, mask=None):
        readable = np.ones(x.shape, bool) if mask is None else np.broadcast_to(mask, x.shape)
        peak = np.where(readable, x, -np.inf).max(axis=axis, keepdims=True)
        e = np.where(readable, np.exp(x - np.where(np.isfinite(peak), peak, 0)), 0.0)
        total = e.sum(axis=axis, keepdims=True)
        weights = e / np.where(total > 0, total, 1)            # a fully masked row: all 0
        return factor * weights, (weights, axis)

    def backward(d_out, cache):
        weights, axis = cache
        d_scaled = factor * d_out
        return weights * (d_scaled - (d_scaled * weights).sum(axis=axis, keepdims=True))
    return forward, backward


def test_a_fixed_case_and_drawn_examples_judge_at_one_tolerance():
    from npformer.testing import conform
    build = lambda: CASES["softmax"](np.random.default_rng(0), 0)          # noqa: E731
    # 1e-8 off is wrong in float64 for both (the fixed cases once let it through at 1e-7) and
    # 1e-11 off is rounding for both
    for factor, ok in ((1 + 1e-8, False), (1 + 1e-11, True)):
        forward, backward = _softmax_off_by(factor)
        patches = {"npformer.t03_softmax.softmax_forward": forward,
                   "npformer.t03_softmax.softmax_backward": backward}
        assert judge_case(build, Patched(patches)).ok is ok, factor
        report = conform("softmax", forward, backward, examples=10, precision="float64")
        assert report.ok is ok, str(report)


def test_float64_code_within_float32_rounding_is_not_said_to_compute_in_float32():
    from npformer.testing import conform
    report = conform("softmax", *_softmax_off_by(1 + 1e-8), examples=10)
    assert "your code computes in float32" not in str(report)
    assert any("within float32 rounding, though your results are not float32 numbers" in n
               for n in report.notes), str(report)


def test_replayed_draws_are_the_examples_hypothesis_draws_for_the_seed():
    """A component's drawn examples, taken from memory the second time, are the ones hypothesis
    itself draws for that seed, even when the code that first saw them wrote into them."""
    from npformer.testing import search
    from npformer.testing.components import component_named
    strategy = component_named("attention").draw
    search._DRAWN.clear()
    drawn = []
    search.explore(strategy, lambda e: drawn.append(e.fresh()), 12, 3)            # hypothesis alone

    def spoil(example):                        # a backward that writes into its inputs
        for value in example.args:
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                value[...] = 0.0
    search.explore(strategy, spoil, 12, 3, replay=True)
    replayed = []
    search.explore(strategy, replayed.append, 12, 3, replay=True)
    assert len(drawn) == len(replayed) >= 12
    for a, b in zip(drawn, replayed):
        assert a.names == b.names and a.options.keys() == b.options.keys()
        for x, y in zip(a.args + tuple(a.options.values()), b.args + tuple(b.options.values())):
            assert (np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y), (a, b)
    assert any(np.any(v != 0) for e in replayed for v in e.args if isinstance(v, np.ndarray) and v.dtype.kind == "f")
    search._DRAWN.clear()
