"""Sampling rules, seeded sampling frequencies, left padding, and KV cache == recompute."""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy import stats

from npformer.t12_generate import choose_next, generate, left_pad, next_token_probs, sample_from
from npformer.t10_model import DecoderConfig, DecoderLM

logit_rows = st.lists(st.floats(-5, 5, allow_nan=False), min_size=2, max_size=12)


@given(logit_rows, st.integers(1, 12), st.integers(0, 2 ** 31))
def test_top_k_never_samples_outside_the_k_most_likely(row, k, seed):
    logits = np.array([row])
    k = min(k, len(row))
    kth_largest = np.sort(logits[0])[::-1][k - 1]
    probs = next_token_probs(logits, top_k=k)
    assert np.all(probs[0][logits[0] < kth_largest] == 0)
    ids = sample_from(np.repeat(probs, 200, axis=0), np.random.default_rng(seed))
    assert np.all(logits[0][ids] >= kth_largest)


@given(logit_rows, st.floats(0.05, 1.0))
def test_top_p_keeps_the_smallest_set_reaching_p(row, p):
    logits = np.array([row])
    full = np.exp(logits[0] - logits[0].max())
    full /= full.sum()
    kept = next_token_probs(logits, top_p=p)[0] > 0
    # written out independently: walk the ids from most to least likely until the mass reaches p
    order = sorted(range(len(row)), key=lambda i: (-full[i], i))
    mass, expected = 0.0, set()
    for i in order:
        if mass >= p - 1e-12:
            break
        expected.add(i)
        mass += full[i]
    assert set(np.flatnonzero(kept)) == expected
    assert full[kept].sum() >= p - 1e-9                         # it reaches p ...
    smallest_kept = full[kept].min()
    assert full[kept].sum() - smallest_kept < p + 1e-9          # ... and no smaller set does


def test_top_p_renormalises_and_top_p_1_keeps_everything():
    logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05]]))
    np.testing.assert_allclose(next_token_probs(logits, top_p=0.7), [[0.625, 0.375, 0, 0]])
    np.testing.assert_allclose(next_token_probs(logits, top_p=1.0), [[0.5, 0.3, 0.15, 0.05]])


def test_temperature_to_zero_equals_greedy(rng):
    logits = rng.standard_normal((50, 30)) * 3
    greedy = choose_next(logits, temperature=0)
    cold = choose_next(logits, temperature=1e-4, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(cold, greedy)
    np.testing.assert_array_equal(greedy, logits.argmax(axis=-1))


def test_temperature_scales_the_logits():
    logits = np.array([[1.0, 2.0, 4.0]])
    expected = np.exp(logits / 2.0) / np.exp(logits / 2.0).sum()
    np.testing.assert_allclose(next_token_probs(logits, temperature=2.0), expected)


def test_sampling_frequencies_match_the_distribution_chi_square():
    probs = np.array([0.4, 0.25, 0.15, 0.1, 0.07, 0.03])
    n = 20000
    ids = sample_from(np.tile(probs, (n, 1)), np.random.default_rng(2024))
    observed = np.bincount(ids, minlength=len(probs))
    expected = n * probs
    chi2 = ((observed - expected) ** 2 / expected).sum()
    assert chi2 < stats.chi2.ppf(0.999, df=len(probs) - 1)
    # and through the logits, with temperature 1
    ids = choose_next(np.tile(np.log(probs), (n, 1)), temperature=1.0, rng=np.random.default_rng(7))
    observed = np.bincount(ids, minlength=len(probs))
    assert ((observed - expected) ** 2 / expected).sum() < stats.chi2.ppf(0.999, df=len(probs) - 1)


def test_left_pad_positions_start_at_zero():
    ids, key_mask, positions = left_pad([[5, 6, 7], [8]], pad_id=0)
    np.testing.assert_array_equal(ids, [[5, 6, 7], [0, 0, 8]])
    np.testing.assert_array_equal(key_mask, [[True, True, True], [False, False, True]])
    np.testing.assert_array_equal(positions[key_mask], [0, 1, 2, 0])


def _model(kind, seed=0):
    maker = DecoderConfig.llama if kind == "llama" else DecoderConfig.gpt2
    config = maker(vocab_size=23, d_model=16, n_heads=4, n_layers=2, max_len=24, init_std=0.5)
    return DecoderLM(config, np.random.default_rng(seed))


PROMPTS = [[3, 4, 5, 6, 7], [8], [9, 10, 11]]


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_cached_generation_equals_full_recompute(kind):
    model = _model(kind)
    cached = generate(model, PROMPTS, 10, pad_id=0)
    recomputed = generate(model, PROMPTS, 10, pad_id=0, use_cache=False)
    assert cached == recomputed and all(len(c) == 10 for c in cached)
    options = dict(temperature=0.9, top_k=8, top_p=0.95)
    a = generate(model, PROMPTS, 10, pad_id=0, rng=np.random.default_rng(5), **options)
    b = generate(model, PROMPTS, 10, pad_id=0, rng=np.random.default_rng(5), use_cache=False, **options)
    assert a == b


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_batched_left_padded_equals_each_prompt_alone(kind):
    model = _model(kind)
    batched = generate(model, PROMPTS, 8, pad_id=0)
    for prompt, out in zip(PROMPTS, batched):
        assert generate(model, [prompt], 8, pad_id=0) == [out]


def test_greedy_is_argmax_of_full_forward():
    model = _model("gpt2")
    out = generate(model, [PROMPTS[0]], 4, pad_id=0)[0]
    seq = list(PROMPTS[0])
    for token in out:                                   # written out: forward, argmax, append
        logits = model(np.array([seq]))
        assert token == int(logits[0, -1].argmax())
        seq.append(token)


def test_stops_at_eos_and_seeded():
    model = _model("gpt2", seed=3)
    free = generate(model, PROMPTS, 10, pad_id=0)
    eos = free[0][3]                                    # pretend the 4th token of row 0 is <eos>
    stopped = generate(model, PROMPTS, 10, eos_id=eos, pad_id=0)
    for f, s in zip(free, stopped):
        assert s == (f[:f.index(eos)] if eos in f else f)
    run = lambda seed: generate(model, PROMPTS, 10, pad_id=0, temperature=1.0,   # noqa: E731
                                rng=np.random.default_rng(seed))
    assert run(1) == run(1)


def test_generation_respects_max_len():
    model = _model("gpt2")
    out = generate(model, [[1] * 20], 50, pad_id=0)
    assert len(out[0]) == 24 - 20 + 1         # the model reads 24 ids and chooses a 25th
    assert len(generate(model, [[1] * 24], 5, pad_id=0)[0]) == 1
    with pytest.raises(ValueError, match="max_len"):
        generate(model, [[1] * 25], 5, pad_id=0)


def test_bad_sampling_options():
    with pytest.raises(ValueError, match="top_p"):
        next_token_probs(np.zeros((1, 3)), top_p=0)
    with pytest.raises(ValueError, match="top_k"):
        next_token_probs(np.zeros((1, 3)), top_k=0)
    with pytest.raises(TypeError, match="rng"):
        choose_next(np.zeros((1, 3)), temperature=1.0)


# -- each step's logits, and the length limit ----------------------------------------------------
def _full_forward_logits(model, prompt, new_ids):
    """Written out without the KV cache or padding: one forward over prompt + ids so far per step."""
    rows = []
    for t in range(len(new_ids)):
        seq = np.array([list(prompt) + list(new_ids[:t])])
        rows.append(model(seq)[0, -1])
    return np.array(rows).reshape(len(new_ids), model.config.vocab_size)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
@pytest.mark.parametrize("use_cache", [True, False])
def test_returned_logits_equal_a_full_forward_per_step(kind, use_cache):
    model = _model(kind).astype(np.float64)
    result = generate(model, PROMPTS, 6, pad_id=0, use_cache=use_cache, return_logits=True)
    assert result.ids == generate(model, PROMPTS, 6, pad_id=0)           # same ids as the default
    for prompt, ids, logits in zip(PROMPTS, result.ids, result.logits):
        assert logits.shape == (len(ids), model.config.vocab_size)
        np.testing.assert_allclose(logits, _full_forward_logits(model, prompt, ids), rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(ids, logits.argmax(axis=-1))      # greedy: the argmax
    for logp, logits in zip(result.log_probs(), result.logits):
        np.testing.assert_allclose(np.exp(logp).sum(axis=-1), 1.0, rtol=1e-12)
        np.testing.assert_allclose(logp - logits, (logp - logits)[:, :1] * np.ones_like(logp), atol=1e-12)


def test_sampled_logits_are_before_temperature_and_eos_cuts_them():
    model = _model("gpt2", seed=3).astype(np.float64)
    free = generate(model, PROMPTS, 10, pad_id=0)
    eos = free[0][3]
    result = generate(model, PROMPTS, 10, eos_id=eos, pad_id=0, temperature=0.7, top_k=5,
                      rng=np.random.default_rng(2), return_logits=True)
    assert sum(len(ids) for ids in result.ids) > 3
    for prompt, ids, logits in zip(PROMPTS, result.ids, result.logits):
        assert eos not in ids and len(logits) == len(ids)
        np.testing.assert_allclose(logits, _full_forward_logits(model, prompt, ids), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_no_model_runs_past_max_len_and_each_row_has_its_own_room(kind):
    model = _model(kind)                                 # max_len 24
    long, short = [1] * 20, [2] * 3
    result = generate(model, [long, short], 30, pad_id=0, return_logits=True)
    # the last new id is chosen from position 24: prompt + new ids = 25, a training sequence's length
    assert [len(ids) for ids in result.ids] == [25 - 20, 25 - 3]
    assert result.hit_max_len == [True, True]
    assert generate(model, [short], 30, pad_id=0) == [result.ids[1]]   # as if it ran alone
    result = generate(model, [long], 5, pad_id=0, return_logits=True)
    assert len(result.ids[0]) == 5 and result.hit_max_len == [False]   # asked for exactly the room
    with pytest.raises(ValueError, match="max_len"):
        generate(model, [short, [1] * 25], 5, pad_id=0)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_an_end_token_in_the_last_slot_is_not_a_cut(kind):
    model, prompt = _model(kind, seed=2), [(3 * i + 2) % 23 for i in range(20)]   # max_len 24
    free = generate(model, [prompt], 30, pad_id=0)[0]    # 5 ids, the last from position 24
    eos = free[-1]                                       # call the last one the end token
    assert len(free) == 5 and eos not in free[:-1]
    result = generate(model, [prompt], 30, eos_id=eos, pad_id=0, return_logits=True)
    assert result.ids == [free[:-1]] and result.hit_max_len == [False]


@pytest.mark.parametrize("options, pattern", [
    (dict(temperature=float("nan")), "temperature"), (dict(temperature=-1.0), "temperature"),
    (dict(temperature=float("inf")), "temperature"), (dict(top_k=5), "top_k, top_p"),
    (dict(top_p=0.9), "top_k, top_p"), (dict(temperature=1.0, top_k=0), "top_k")])
def test_sampling_options_are_checked(options, pattern):
    with pytest.raises(ValueError, match=pattern):
        generate(_model("gpt2"), PROMPTS, 3, pad_id=0, rng=np.random.default_rng(0), **options)
