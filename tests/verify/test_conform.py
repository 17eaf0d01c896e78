"""npformer.testing.conform on other people's code: right implementations conform, wrong ones
fail with their smallest example and, where it is a catalogued mistake, its name."""
import os
import subprocess
import sys

import numpy as np
import pytest

import npformer
from npformer.cli import main
from npformer.testing import COMPONENTS, ConformanceError, conform
from npformer.testing.components import component_named
from npformer.specs.t13_kv_cache import decode_step
from npformer.testing.strategies import Example
from npformer.testing.subject import Subject

EXAMPLES = 25


# -- npformer's own functions conform, on both tracks --------------------------------------------
@pytest.mark.parametrize("track", ["plain", "fast"])
@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_npformers_own_functions_conform(name, track):
    component = component_named(name)
    forward, backward = component.reference_pair()
    if name == "kv_decode":
        forward, backward = decode_step, None
    with npformer.track(track):
        report = conform(name, forward, backward, examples=EXAMPLES)
    assert report.ok, str(report)
    assert all(c.examples >= 1 for c in report.checks)


# -- wrong implementations fail with a small example ----------------------------------------------
def softmax(x, axis=-1, mask=None):
    if mask is not None:
        x = np.where(mask, x, -np.inf)
    peak = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(peak), peak, 0))
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1)


def attention(q, k, v, mask=None, scale=None, causal=False, window=None, *, scale_by=None,
              mask_after=False, group_of=None):
    """Plain attention written from scratch, with switches for the usual mistakes."""
    B, H, N, D = q.shape
    M = k.shape[2]
    heads = [group_of(h, H, k.shape[1]) if group_of else h * k.shape[1] // H for h in range(H)]
    k, v = k[:, heads], v[:, heads]
    scores = q @ k.swapaxes(-1, -2) * (scale_by(D) if scale_by else (scale or 1 / np.sqrt(D)))
    allowed = np.ones(scores.shape, bool) if mask is None else np.broadcast_to(mask, scores.shape)
    if causal:
        i, j = np.arange(M - N, M)[:, None], np.arange(M)[None, :]
        allowed = allowed & (j <= i) & ((j > i - window) if window else True)
    if mask_after:
        weights = softmax(scores) * allowed
    else:
        weights = softmax(scores, mask=allowed)
    return weights @ v


def _check_fails(report, check, shapes_at_most=3):
    assert not report.ok, str(report)
    failed = {c.name: c for c in report.checks if c.failure is not None}
    assert check in failed, str(report)
    example = failed[check].failure.example
    assert example is not None and all(a.size <= 4 ** shapes_at_most for a in example.args
                                      if isinstance(a, np.ndarray)), str(report)
    return failed[check].failure


def test_a_wrong_scale_fails_on_a_small_example():
    report = conform("attention", lambda *a, **o: attention(*a, **o, scale_by=lambda D: 1 / D),
                     examples=EXAMPLES)
    failure = _check_fails(report, "output")
    assert "relative error" in failure.message
    assert "q = " in failure.example.describe()


def test_a_mask_applied_after_the_softmax_fails():
    report = conform("attention", lambda *a, **o: attention(*a, **o, mask_after=True), examples=60)
    _check_fails(report, "output")


def test_gqa_heads_mapped_wrongly_fail():
    # query head h should read key/value head h // (H / H_kv); h % H_kv is the usual slip
    report = conform("grouped_attention",
                     lambda *a, **o: attention(*a, **o, group_of=lambda h, H, H_kv: h % H_kv),
                     examples=60)
    failure = _check_fails(report, "output")
    q, k = failure.example.args[:2]
    assert q.shape[1] > k.shape[1] > 1            # only GQA with several key/value heads shows it


def test_rope_with_the_wrong_pairing_fails():
    reference, _ = component_named("rope").reference_pair()

    def interleaved_always(x, positions, base=10000.0, layout="half"):
        return reference(x, positions, base, "interleaved")[0]
    report = conform("rope", interleaved_always, examples=60)
    failure = _check_fails(report, "output")
    assert failure.example.options["layout"] == "half"


def test_layernorm_with_a_biased_variance_in_the_backward_fails():
    forward, backward = component_named("layernorm").reference_pair()

    def unbiased_backward(d_out, cache):
        xhat, gamma = cache.xhat, cache.gamma
        d = xhat.shape[-1]
        d_xhat = d_out * gamma
        # the variance with n - 1 in its backward only: the last term out by d / (d - 1)
        d_x = cache.rstd * (d_xhat - d_xhat.mean(-1, keepdims=True)
                            - xhat * (d_xhat * xhat).sum(-1, keepdims=True) / max(d - 1, 1))
        return d_x, (d_out * xhat).reshape(-1, d).sum(0), d_out.reshape(-1, d).sum(0)
    report = conform("layernorm", forward, unbiased_backward, examples=60)
    _check_fails(report, "gradient of x")


def test_cross_entropy_counting_ignored_targets_fails():
    def counted_all(logits, targets, ignore_index=-100):
        safe = np.where(targets == ignore_index, 0, targets)
        log_p = logits - logits.max(-1, keepdims=True)
        log_p = log_p - np.log(np.exp(log_p).sum(-1, keepdims=True))
        picked = np.take_along_axis(log_p, safe[..., None], -1)[..., 0]
        return -(picked * (targets != ignore_index)).sum() / targets.size      # divides by every target
    report = conform("cross_entropy", counted_all, examples=60)
    failure = _check_fails(report, "output")
    assert (failure.example.args[1] == -100).any()


def test_a_catalogued_mistake_is_named():
    forward, _ = component_named("softmax").reference_pair()

    def diagonal_only(d_out, cache):
        return cache.y * (1 - cache.y) * d_out
    report = conform("softmax", forward, diagonal_only, examples=EXAMPLES)
    failure = _check_fails(report, "gradient of x")
    assert failure.mistake is not None and failure.mistake.name == "softmax-diagonal-only"
    assert "the mistake:" in str(report) and "re-check:" in str(report)


def test_a_vjp_is_accepted_and_raise_if_failed_reports():
    forward, backward = component_named("linear").reference_pair()

    def vjp(inputs, d_out):
        _, cache = forward(*[inputs[n] for n in ("x", "weight", "bias") if n in inputs])
        d_x, d_weight, d_bias = backward(d_out, cache)
        return (d_x, -d_weight) + ((d_bias,) if "bias" in inputs else ())
    report = conform("linear", lambda *a: forward(*a)[0], vjp=vjp, examples=EXAMPLES)
    with pytest.raises(ConformanceError, match="gradient of weight"):
        report.raise_if_failed()
    assert "a sign flip" in str(report)


def test_a_decoding_step_that_reads_ahead_fails():
    def no_cache(q_t, k_t, v_t, cache):
        keys = k_t if cache is None else np.concatenate([cache[0], k_t], axis=2)
        values = v_t if cache is None else np.concatenate([cache[1], v_t], axis=2)
        return npformer.grouped_attention_forward(q_t, keys[:, :, -1:], values[:, :, -1:])[0], (keys, values)
    report = conform("kv_decode", no_cache, examples=EXAMPLES)          # reads only the newest key
    _check_fails(report, "output")


def test_forward_only_is_checked_and_says_what_did_not_run():
    report = conform("relu", lambda x: np.maximum(x, 0), examples=EXAMPLES)
    assert report.ok and "not run: no backward or vjp given" in report.summary()


def _numpy_attention(fill):
    def attention(q, k, v, mask=None):                  # no scale, causal or window parameter
        scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
        if mask is not None:
            scores = np.where(mask, scores, fill)
        peak = scores.max(-1, keepdims=True)
        e = np.exp(scores - np.where(np.isfinite(peak), peak, 0))
        total = e.sum(-1, keepdims=True)
        return (e / np.where(total > 0, total, 1)) @ v
    return attention


def test_options_a_function_does_not_take_are_left_at_their_defaults():
    report = conform("attention", _numpy_attention(-np.inf), examples=EXAMPLES)
    assert report.ok, str(report)
    text = " ".join(str(report).split())    # the report wraps long lines
    assert "attention takes no scale, causal, window: checked only on examples with scale=None, " \
           "causal=False, window=None" in text


def test_a_convention_and_a_mistake_at_once_name_each_as_what_it_is():
    forward, _ = component_named("softmax").reference_pair()

    def finite_fill(x, axis=-1, mask=None):          # -1e9 where a masked score should be -inf
        return forward(x if mask is None else np.where(mask, x, -1e9), axis)

    def diagonal_only(d_out, cache):
        return cache.y * (1 - cache.y) * d_out
    report = conform("softmax", finite_fill, diagonal_only, examples=EXAMPLES)
    # the forward agrees under two conventions (a row that reads nothing is uniform, and an
    # additive finite fill); the diagonal-only backward sends gradient into a row that reads
    # nothing, as an additive fill's backward does, so under that one a single mistake explains
    # every failure, and it is that report that is given: the convention and the mistake, each named
    assert report.convention == {"mask": "additive finfo.min"} and not report.ok, str(report)
    assert "output" not in {c.name for c in report.failures}, str(report)
    assert _check_fails(report, "gradient of x").mistake.name == "softmax-diagonal-only", str(report)
    assert {c.name for c in report.failures} == {"gradient of x"}, str(report)


def test_under_the_first_convention_the_forward_follows_a_second_cause_is_said():
    """Stated up front, the uniform row of a finite fill leaves the diagonal-only backward a
    second cause, on a row that reads nothing."""
    forward, _ = component_named("softmax").reference_pair()

    def finite_fill(x, axis=-1, mask=None):
        return forward(x if mask is None else np.where(mask, x, -1e9), axis)

    def diagonal_only(d_out, cache):
        return cache.y * (1 - cache.y) * d_out
    report = conform("softmax", finite_fill, diagonal_only, examples=EXAMPLES,
                     convention={"fully_masked_row": "uniform"})
    assert _check_fails(report, "gradient of x").mistake.name == "softmax-diagonal-only", str(report)
    other = _check_fails(report, "gradient of x: another cause")
    assert other.example.options.get("mask") is not None, str(report)
    assert "the mistake named above, 'softmax-diagonal-only', does not explain this example" in other.message


def test_code_that_writes_into_its_inputs_leaves_the_drawn_example_alone():
    def relu_in_place(x):
        np.maximum(x, 0, out=x)
        return x
    example = Example(("x",), (np.array([-1.0, 2.0]),))
    values, error = Subject("relu", relu_in_place).result(example)
    assert error is None and values["output"].tolist() == [0.0, 2.0]
    assert example.args[0].tolist() == [-1.0, 2.0]


def test_a_finite_mask_fill_is_a_convention_on_a_forward_alone():
    # -1e9 instead of -inf: a query with no key to read gets the average of the values, not 0
    report = conform("attention", _numpy_attention(-1e9), examples=EXAMPLES)
    assert report.verdict == "conforms under convention", str(report)
    assert report.convention == {"fully_masked_row": "mean of values"}


def test_every_check_runs_on_every_example_after_a_failure():
    forward, _ = component_named("softmax").reference_pair()
    report = conform("softmax", forward, lambda d_out, cache: cache.y * d_out, examples=EXAMPLES)
    output = next(c for c in report.checks if c.name == "output")
    assert output.passed and output.examples >= EXAMPLES
    assert _check_fails(report, "gradient of x").mistake.name == "softmax-no-sum-term"


# -- the command ---------------------------------------------------------------------------------
MY_SOFTMAX = '''
import numpy as np

def softmax(x, axis=-1, mask=None):
    if mask is not None:
        x = np.where(mask, x, -np.inf)
    peak = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(peak), peak, 0))
    total = e.sum(axis=axis, keepdims=True)
    y = e / np.where(total > 0, total, 1)
    return y, (y, axis)

def backward(d_out, cache):
    y, axis = cache
    return y * (d_out - (d_out * y).sum(axis=axis, keepdims=True))

def backward_last_axis(d_out, cache):
    y, axis = cache
    return y * (d_out - (d_out * y).sum(axis=-1, keepdims=True))
'''


def test_the_command_exits_0_1_or_2(tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_text(MY_SOFTMAX)
    base = ["conform", f"{path}:softmax", "--component", "softmax", "--examples", "30"]
    assert main(base + ["--backward", "backward"]) == 0
    assert "conforms (float64, 30 examples; every property)" in capsys.readouterr().out
    assert main(base + ["--backward", "backward_last_axis"]) == 1       # the axis argument ignored
    assert "does not conform" in capsys.readouterr().out
    assert main(base + ["--backward", "nope"]) == 2
    assert f"{path}: no function nope" in capsys.readouterr().err
    assert main(["conform", f"{tmp_path}/missing.py:f", "--component", "softmax"]) == 2
    assert main(["conform", f"{path}:softmax", "--component", "sofmax"]) == 2
    said = capsys.readouterr().err
    assert "--component: expected one of " in said and ", softmax, " in said and "got 'sofmax'" in said


@pytest.mark.skipif(__import__("importlib").util.find_spec("torch") is not None, reason="torch installed")
def test_the_torch_adapter_without_torch_says_so_in_one_line():
    code = "from npformer.testing import from_torch; from_torch(lambda x: x)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ})
    assert done.returncode != 0
    assert "AdapterUnavailable: torch is not installed; pip install torch==2.13.0" in done.stderr


def test_an_adapter_is_taken_as_the_forward_and_brings_its_own_vjp():
    """An adapter (what from_torch and from_jax return) is no function, and conform takes it."""
    from npformer.testing.adapters import Adapted

    def forward(x, axis=-1, mask=None):
        scores = np.where(mask, x, -np.inf) if mask is not None else x
        peak = scores.max(axis=axis, keepdims=True)
        e = np.exp(scores - np.where(np.isinf(peak), 0.0, peak))
        total = e.sum(axis=axis, keepdims=True)
        return e / np.where(total > 0, total, 1.0)

    def vjp(inputs, d_out):
        y = forward(**inputs)
        return (y * (d_out - (d_out * y).sum(axis=inputs.get("axis", -1), keepdims=True)),)

    report = conform("softmax", Adapted("numpy softmax", forward, vjp, forward), examples=12)
    assert report.ok, str(report)
