"""The two tracks compute the same numbers: every fast twin equals its plain function,
outputs and every gradient, to 1e-12 (relative) in float64 and 1e-5 in float32."""
import importlib
import os
import pkgutil
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, strategies as st

import npformer
from npformer import track
from npformer import use_track
from npformer.fast.parallel import on_cores
from npformer.t05_rope import Rotary, rotate
from npformer.core.track import current_track, twins

from support.twin_pairs import METHODS

TOLERANCE = {np.float64: 1e-12, np.float32: 1e-5}
dtypes = st.sampled_from([np.float64, np.float32])
seeds = st.integers(0, 2 ** 32 - 1)


def rel_error(a, b, floor=0.0):
    """max |a - b| / max(|a|, |b|, floor), over the whole array."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = max(np.abs(a).max(initial=0), np.abs(b).max(initial=0), floor, 1e-300)
    return float(np.abs(a - b).max(initial=0) / scale)


def assert_same(plain, fast, dtype, what, floor=0.0):
    """Equal to the track tolerance, relative over the whole array (see ``term_scale``)."""
    assert np.shape(plain) == np.shape(fast), what
    if plain is None:
        assert fast is None, what
        return
    assert np.asarray(fast).dtype == np.asarray(plain).dtype == dtype, what
    error = rel_error(plain, fast, floor)
    assert error <= TOLERANCE[dtype], f"{what}: relative error {error:.2e}"


def term_scale(*arrays):
    """A tenth of the size of the terms a result is summed from: (input scale)^2 / 10.

    A gradient much smaller than that (a row with one readable key, a saturated softmax,
    a key bias that cannot change any softmax) is what is left of nearly equal terms
    cancelling; its rounding error is relative to the terms, not to the small residue,
    so the relative error is measured against this floor when the result is smaller.
    """
    scale = max([1.0] + [float(np.abs(a).max(initial=0)) for a in arrays
                         if isinstance(a, np.ndarray) and np.issubdtype(a.dtype, np.floating)])
    return scale ** 2 / 10


# -- one case per pair: (pair name, builder(rng, dtype, scale) -> (inputs, options)) ------
def _arrays(rng, dtype, scale, *shapes):
    return tuple((scale * rng.standard_normal(s)).astype(dtype) for s in shapes)


def _softmax(rng, dtype, scale, B, N, d):
    mask = rng.random((B, N, d)) < 0.7
    mask[0, 0] = False                                     # a fully masked row
    return _arrays(rng, dtype, scale, (B, N, d)), {"mask": mask if rng.random() < 0.7 else None}


def _elementwise(rng, dtype, scale, B, N, d):
    return _arrays(rng, dtype, scale, (B, N, d)), {}


def _linear(rng, dtype, scale, B, N, d):
    x, w, b = _arrays(rng, dtype, scale, (B, N, d), (d, d + 2), (d + 2,))
    return ((x, w, b) if rng.random() < 0.5 else (x, w)), {}


def _layernorm(rng, dtype, scale, B, N, d):
    return _arrays(rng, dtype, scale, (B, N, d), (d,), (d,)), {"eps": 1e-5}


def _rmsnorm(rng, dtype, scale, B, N, d):
    return _arrays(rng, dtype, scale, (B, N, d), (d,)), {"eps": 1e-6}


def _qkv(rng, dtype, scale, B, N, d, grouped=True):
    H_kv = int(rng.integers(1, 3))
    H = H_kv * int(rng.integers(1, 3)) if grouped else H_kv
    M = N + int(rng.integers(0, 3))                        # queries after M - N cached keys
    q, k, v = _arrays(rng, dtype, scale, (B, H, N, d), (B, H_kv, M, d), (B, H_kv, M, d))
    options = {"causal": bool(rng.random() < 0.6)}
    if options["causal"] and rng.random() < 0.5:
        options["window"] = int(rng.integers(1, M + 1))
    if rng.random() < 0.5:
        options["mask"] = rng.random((B, 1, 1, M)) < 0.8
    return (q, k, v), options


def _qkv_same_heads(rng, dtype, scale, B, N, d):
    return _qkv(rng, dtype, scale, B, N, d, grouped=False)


def _flash(rng, dtype, scale, B, N, d):
    inputs, options = _qkv(rng, dtype, scale, B, N, d)
    return inputs, {**options, "block_size": int(rng.integers(1, 6))}


def _two_like(rng, dtype, scale, B, N, d):
    return _arrays(rng, dtype, scale, (B, N, d), (B, N, d)), {}


def _cross_entropy(rng, dtype, scale, B, N, d):
    targets = rng.integers(0, d, (B, N))
    targets[rng.random((B, N)) < 0.3] = npformer.IGNORE_INDEX
    return _arrays(rng, dtype, scale, (B, N, d)) + (targets,), {}


PAIRS = {
    "softmax": (npformer.softmax_forward, npformer.softmax_backward, _softmax),
    "gelu_tanh": (npformer.gelu_tanh_forward, npformer.gelu_tanh_backward, _elementwise),
    "silu": (npformer.silu_forward, npformer.silu_backward, _elementwise),
    "swiglu_gate": (npformer.swiglu_gate_forward, npformer.swiglu_gate_backward, _two_like),
    "linear": (npformer.linear_forward, npformer.linear_backward, _linear),
    "layernorm": (npformer.layernorm_forward, npformer.layernorm_backward, _layernorm),
    "rmsnorm": (npformer.rmsnorm_forward, npformer.rmsnorm_backward, _rmsnorm),
    "attention": (npformer.attention_forward, npformer.attention_backward, _qkv_same_heads),
    "grouped_attention": (npformer.grouped_attention_forward, npformer.grouped_attention_backward, _qkv),
    "flash_attention": (npformer.flash_attention_forward, npformer.flash_attention_backward, _flash),
    "cross_entropy": (npformer.cross_entropy_forward, npformer.cross_entropy_backward, _cross_entropy),
}


def _run(name, inputs, options, upstream):
    forward, backward, _ = PAIRS[name]
    out, cache = forward(*[x.copy() for x in inputs], **options)
    grads = backward(upstream.copy() if isinstance(upstream, np.ndarray) else upstream, cache)
    return out, grads if isinstance(grads, tuple) else (grads,)


@pytest.mark.parametrize("cores", [1, 2])
@pytest.mark.parametrize("name", sorted(PAIRS))
@given(seed=seeds, dtype=dtypes, scale=st.sampled_from([0.1, 1.0, 3.0]),
       B=st.integers(1, 3), N=st.integers(1, 7), d=st.integers(2, 9))
def test_fast_twin_equals_plain(name, cores, seed, dtype, scale, B, N, d):
    # with 2 cores and no minimum of work per block, every kernel splits whatever it can
    with on_cores(cores, min_work=1, beside_blas=True):
        _check_pair(name, seed, dtype, scale, B, N, d)


def _check_pair(name, seed, dtype, scale, B, N, d):
    rng = np.random.default_rng(seed)
    inputs, options = PAIRS[name][2](rng, dtype, scale, B, N, d)
    with track("plain"):
        out, _ = PAIRS[name][0](*inputs, **options)
    upstream = 1.0 if np.ndim(out) == 0 else rng.standard_normal(np.shape(out)).astype(dtype)
    with track("plain"):
        plain_out, plain_grads = _run(name, inputs, options, upstream)
    with track("fast"):
        fast_out, fast_grads = _run(name, inputs, options, upstream)
    floor = term_scale(*inputs, np.asarray(upstream, dtype))
    assert_same(plain_out, fast_out, dtype, f"{name} output", floor)
    for i, (p, f) in enumerate(zip(plain_grads, fast_grads)):
        assert_same(p, f, dtype, f"{name} gradient {i}", floor)


@pytest.mark.parametrize("cores", [1, 2])
@given(seed=seeds, dtype=dtypes, steps=st.integers(1, 4), decay=st.sampled_from([0.0, 0.1]))
def test_fast_adamw_update_equals_plain(cores, seed, dtype, steps, decay):
    with on_cores(cores, min_work=1, beside_blas=True):
        _check_adamw(seed, dtype, steps, decay)


def _check_adamw(seed, dtype, steps, decay):
    rng = np.random.default_rng(seed)
    start = rng.standard_normal((3, 5)).astype(dtype)
    results = {}
    for name in ("plain", "fast"):
        data, m, v = start.copy(), np.zeros_like(start), np.zeros_like(start)
        with track(name):
            for step in range(1, steps + 1):
                grad = np.random.default_rng([seed, step]).standard_normal(start.shape).astype(dtype)
                data, m, v = npformer.adamw_update(data, grad, m, v, step, 1e-2, (0.9, 0.98), 1e-8, decay)
        results[name] = (data, m, v)
    for what, p, f in zip(("data", "m", "v"), results["plain"], results["fast"]):
        assert_same(p, f, dtype, what)


@pytest.mark.parametrize("cores", [1, 2])
@given(seed=seeds, dtype=dtypes, layout=st.sampled_from(["half", "interleaved"]),
       fraction=st.sampled_from([1.0, 0.5]), per_row=st.booleans(), B=st.integers(1, 3),
       N=st.integers(1, 6), D=st.sampled_from([4, 8, 12]))
def test_fast_rotation_equals_plain(cores, seed, dtype, layout, fraction, per_row, B, N, D):
    rng = np.random.default_rng(seed)
    rope = Rotary(D, layout=layout, fraction=fraction)
    positions = rng.integers(0, 50, (B, N)) if per_row else np.arange(N)
    cos, sin = rope.tables(positions, dtype)
    x = rng.standard_normal((B, 2, N, D)).astype(dtype)
    with track("plain"):
        expected = rotate(x, cos, sin, layout, rope.rotated)
    with track("fast"), on_cores(cores, min_work=1, beside_blas=True):
        assert_same(expected, rotate(x, cos, sin, layout, rope.rotated), dtype, "rotation")


def _marked_functions():
    """Every function and method in npformer marked @fast_twin (it carries a ``twin_key``)."""
    found = {}
    for info in pkgutil.walk_packages(npformer.__path__, "npformer."):
        if info.name.endswith("__main__"):
            continue                                        # running it would start the CLI
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if getattr(value, "__module__", None) != module.__name__:
                continue
            for candidate in [value, *(vars(value).values() if isinstance(value, type) else ())]:
                if callable(candidate) and hasattr(candidate, "twin_key"):
                    found[candidate.twin_key] = candidate
    return found


def test_every_marked_function_has_a_twin_and_an_equality_test():
    marked = _marked_functions()
    assert set(marked) == set(twins())                      # no mark without a twin, no stray twin
    tested = {fn.twin_key for forward, backward, _ in PAIRS.values() for fn in (forward, backward)}
    tested.add(npformer.adamw_update.twin_key)
    tested.add(rotate.twin_key)
    tested |= set(METHODS)
    assert set(marked) == tested


def test_a_fast_twin_names_its_plain_twin():
    for key, (plain, fast) in twins().items():
        assert plain.__name__ in (fast.__doc__ or ""), key
        assert fast.__module__.startswith("npformer.fast.")


def test_the_plain_track_runs_by_default_though_the_twins_are_registered():
    # what a reader reads is what runs: importing npformer registers the fast twins, and the
    # plain function still runs unless a program asks for the fast track
    code = ("import numpy as np, npformer; from npformer.core import track as t; "
            "key = 'npformer.t03_softmax.softmax_forward'; assert key in t.twins(); "
            "t._FAST[key] = lambda *a, **k: 'fast'; x = np.zeros((1, 2)); "
            "print(npformer.current_track(), type(npformer.t03_softmax.softmax_forward(x)).__name__)")
    env = {k: v for k, v in os.environ.items() if k != "NPFORMER_TRACK"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.split() == ["plain", "tuple"], done.stderr
    done = subprocess.run([sys.executable, "-c", code], env={**env, "NPFORMER_TRACK": "fast"},
                          capture_output=True, text=True)
    assert done.stdout.split() == ["fast", "str"], done.stderr


def test_the_switch():
    assert current_track() == "plain"                       # the default
    with track("fast"):
        assert current_track() == "fast"
        with track("plain"):
            assert current_track() == "plain"
        assert current_track() == "fast"
    assert current_track() == "plain"
    with pytest.raises(ValueError, match=r"track: expected one of plain, fast, got 'quick'"):
        use_track("quick")
    assert current_track() == "plain"


def test_a_track_chosen_in_one_thread_leaves_the_others_alone():
    seen = {}
    inside, leave = threading.Event(), threading.Event()

    def other():
        with track("fast"):
            seen["other, inside"] = current_track()
            inside.set()
            leave.wait(10)
        seen["other, after"] = current_track()

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait(10)
    seen["main, meanwhile"] = current_track()
    leave.set()
    thread.join()
    assert seen == {"other, inside": "fast", "main, meanwhile": "plain", "other, after": "plain"}


def test_use_track_returns_the_previous_track():
    previous = use_track("fast")
    try:
        assert previous == "plain" and current_track() == "fast"
    finally:
        assert use_track(previous) == "fast"


def test_the_environment_variable_chooses_the_track():
    code = "import npformer; print(npformer.current_track())"
    env = {**os.environ, "NPFORMER_TRACK": "fast"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "fast"
    env["NPFORMER_TRACK"] = "slow"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "NPFORMER_TRACK: expected one of plain, fast, got 'slow'" in done.stderr


def test_the_environment_variable_runs_the_twins():
    code = ("import numpy as np, npformer; from npformer.core.track import _FAST; "
            "npformer.softmax(np.zeros(3)); print(len(_FAST) > 0)")
    env = {**os.environ, "NPFORMER_TRACK": "fast"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "True", done.stderr


# -- whole models: the same logits, gradients and optimizer steps on both tracks -------------
RECIPES = {
    "gpt2": lambda: npformer.DecoderConfig.gpt2(vocab_size=17, d_model=16, n_heads=4, n_layers=2),
    "llama": lambda: npformer.DecoderConfig.llama(vocab_size=17, d_model=16, n_heads=4, n_kv_heads=2,
                                                  n_layers=2),
    "flash": lambda: npformer.DecoderConfig.gpt2(vocab_size=17, d_model=16, n_heads=2, n_layers=2,
                                                 attention="flash", window=3),
}


def _one_training_step(recipe, dtype, seed):
    model = npformer.DecoderLM(RECIPES[recipe](), np.random.default_rng(seed), dtype)
    rng = np.random.default_rng(seed + 1)
    ids = rng.integers(0, 17, (2, 6))
    key_mask = np.ones((2, 6), bool)
    key_mask[1, :2] = False
    targets = np.where(key_mask, rng.integers(0, 17, (2, 6)), npformer.IGNORE_INDEX)
    logits, cache = model.forward(ids, key_mask=key_mask)
    loss, d_logits = npformer.cross_entropy(logits, targets)
    model.backward(d_logits, cache)
    grads = {name: p.grad.copy() for name, p in model.named_parameters()}
    npformer.AdamW(model.named_parameters(), lr=1e-2).step()
    return logits, loss, grads, model.state_dict()


@pytest.mark.parametrize("cores", [1, 2])
@pytest.mark.parametrize("recipe", sorted(RECIPES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_model_trains_identically_on_both_tracks(recipe, dtype, cores):
    with track("plain"):
        logits, loss, grads, params = _one_training_step(recipe, dtype, 3)
    with track("fast"), on_cores(cores, min_work=1, beside_blas=True):
        fast_logits, fast_loss, fast_grads, fast_params = _one_training_step(recipe, dtype, 3)
    assert_same(logits, fast_logits, dtype, "logits")
    assert_same(loss, fast_loss, dtype, "loss")
    floor = term_scale(*grads.values())
    noise = 1000 * np.finfo(dtype).eps * 10 * floor           # rounding noise of a zero gradient
    for name in grads:
        assert_same(grads[name], fast_grads[name], dtype, f"gradient of {name}", floor)
        # Adam divides by sqrt(v): a gradient entry that is only rounding noise (the key bias
        # cannot change any softmax) becomes a full-size random step on either track
        meaningful = np.abs(grads[name]) > noise
        assert_same(params[name][meaningful], fast_params[name][meaningful], dtype,
                    f"{name} after an AdamW step")


@pytest.mark.parametrize("name", ["gelu_tanh", "silu"])
def test_a_number_stays_a_number_on_both_tracks(name):
    forward, backward, _ = PAIRS[name]
    results = []
    for which in ("plain", "fast"):
        with track(which):
            y, cache = forward(np.array(0.7))
            results.append((y, backward(np.array(2.0), cache)))
    for y, d_x in results:
        assert np.ndim(y) == 0 and np.ndim(d_x) == 0
    assert_same(results[0][0], results[1][0], np.float64, "output")
    assert_same(results[0][1], results[1][1], np.float64, "gradient")
