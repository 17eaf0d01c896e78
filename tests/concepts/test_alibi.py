"""ALiBi (t21_alibi.py): the slopes of the paper, the bias's relative-position facts, a model that
trains, saves, loads and decodes through its KV cache, and a stranger's ALiBi judged.

Independent facts used: the ALiBi paper (Press et al., 2022, section 3) gives the slopes for 8
heads as 1/2, 1/4, ..., 1/256 and for 16 heads as 1/2^0.5, 1/2, ..., 1/256; for 6 heads its
rule (the slopes of 4 heads, then every other slope of 8 heads) gives 2^-2, 2^-4, 2^-6, 2^-8,
2^-1, 2^-3. A softmax does not change when one number is added to a whole row, so the bias
written with the key's position alone (BLOOM's + m_h j) gives the same weights as - m_h (i - j).
"""
import numpy as np
import pytest

import npformer
from npformer import (ALiBiAttention, DecoderConfig, DecoderLM, alibi_backward,
                      alibi_forward, alibi_slopes, assert_gradcheck, load_checkpoint)
from npformer.cli import main
from npformer.testing import conform
from support.gradients import check_gradients, gradient_checks


@pytest.mark.parametrize("heads, slopes", [
    (8, [2.0 ** -k for k in range(1, 9)]),
    (16, [2.0 ** (-k / 2) for k in range(1, 17)]),
    (6, [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]),
    (1, [2.0 ** -8]),
])
def test_slopes_are_the_papers(heads, slopes):
    np.testing.assert_allclose(alibi_slopes(heads), slopes, rtol=1e-15)


@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "8"])
def test_slopes_refuse_a_head_count_that_is_not_a_positive_integer(bad):
    with pytest.raises(ValueError, match="n_heads"):
        alibi_slopes(bad)


def test_the_bias_on_a_small_table_by_hand():
    # two heads of slopes 1/2 and 1/4; two queries after one cached key (positions 1, 2 of 0..2)
    biased, _ = alibi_forward(np.zeros((1, 2, 2, 3)), np.array([0.5, 0.25]))
    np.testing.assert_array_equal(biased[0, 0], [[-0.5, 0.0, 0.5], [-1.0, -0.5, 0.0]])
    np.testing.assert_array_equal(biased[0, 1], [[-0.25, 0.0, 0.25], [-0.5, -0.25, 0.0]])


def test_the_backward_by_finite_differences_and_leaves_its_inputs_alone(rng):
    scores, slopes = rng.normal(size=(2, 3, 4, 6)), alibi_slopes(3) + 0.1
    assert_gradcheck((alibi_forward, alibi_backward), scores, slopes, rng=rng, randomize=False)
    d_out = rng.normal(size=scores.shape)
    kept = d_out.copy()
    _, cache = alibi_forward(scores, slopes)
    d_scores, d_slopes = alibi_backward(d_out, cache)
    np.testing.assert_array_equal(d_out, kept)
    # the derivative of scores - m (i - j) in m, summed by hand over one head's table
    i, j = np.arange(2, 6)[:, None], np.arange(6)[None, :]
    assert d_slopes[1] == pytest.approx(-(d_out[:, 1] * (i - j)).sum(), rel=1e-12)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_attention_weights_equal_blooms_key_position_form(rng):
    B, H, N, D = 2, 6, 5, 4
    q, k, v = (rng.normal(size=(B, H, N, D)) for _ in range(3))
    out, cache = ALiBiAttention().forward(q, k, v, causal=True)
    m = np.array([2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3])
    scores = q @ k.swapaxes(-1, -2) / 2.0 + m[:, None, None] * np.arange(N)      # + m_h j
    scores = np.where(np.tril(np.ones((N, N), bool)), scores, -np.inf)
    np.testing.assert_allclose(cache.weights, _softmax(scores), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(out, _softmax(scores) @ v, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name, size, track", gradient_checks("t21_alibi.py"))
def test_gradient_check(name, size, track):
    check_gradients(name, size, track)


def test_a_decoder_reads_past_max_len_and_its_cache_agrees(rng):
    # no position table: a model made for 4 positions runs on 9, and decoding one token at a
    # time through the KV cache gives the full forward's logits
    model = DecoderLM(DecoderConfig(d_model=8, n_heads=4, n_kv_heads=2, vocab_size=7, positions="alibi",
                                    max_len=4, n_layers=2), rng).astype(np.float64)
    ids = rng.integers(0, 7, (2, 9))
    full = model.forward(ids)[0]
    cache = model.new_kv_cache(2, capacity=9)
    steps = np.concatenate([model.forward(ids[:, t:t + 1], kv_cache=cache)[0] for t in range(9)], axis=1)
    np.testing.assert_allclose(steps, full, rtol=1e-10, atol=1e-12)


def test_alibi_with_blockwise_attention_is_refused():
    with pytest.raises(ValueError, match="attention='plain'"):
        DecoderConfig(d_model=8, n_heads=2, vocab_size=5, positions="alibi", attention="flash")


def test_train_save_load_and_generate_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--data", "reverse", "--positions", "alibi", "--steps", "5", "--out", str(out),
                 "--no-progress", "--d-model", "16", "--layers", "1", "--heads", "2"]) == 0
    model, tokenizer, _ = load_checkpoint(out)
    assert model.config.positions == "alibi"
    assert isinstance(model.blocks[0].attn.kernel, ALiBiAttention)
    assert main(["generate", str(out), "--prompt", "12345>"]) == 0
    assert main(["train", "--out", str(out), "--resume", "--steps", "7", "--no-progress"]) == 0
    assert load_checkpoint(out)[0].config.positions == "alibi"


# -- a stranger's ALiBi, written from the paper in BLOOM's form (+ m_h j, the key's position) --
def strangers_forward(scores, slopes):
    M = scores.shape[-1]
    return scores + slopes[:, None, None] * np.arange(M), M


def strangers_backward(d_out, M):
    return d_out, (d_out * np.arange(M)).sum(axis=(0, 2, 3))


def test_a_strangers_alibi_in_blooms_form_conforms_under_its_convention():
    report = conform("alibi", strangers_forward, strangers_backward, examples=30)
    assert report.verdict == "conforms under convention", report
    assert report.convention == {"bias": "+ m j (the key's position)"}


def test_a_strangers_alibi_with_the_wrong_sign_is_named():
    def forward(scores, slopes):
        N, M = scores.shape[-2:]
        i, j = np.arange(M - N, M)[:, None], np.arange(M)[None, :]
        return scores + slopes[:, None, None] * (i - j)              # the sign of the bias lost

    report = conform("alibi", forward, examples=30)
    assert not report.ok
    assert "alibi-bias-rewards-distance" in str(report), report


def test_alibi_is_exported_and_in_the_registry():
    from npformer.specs import CASES, COMPONENTS, EXERCISES
    assert "alibi" in COMPONENTS and "DecoderLM (alibi)" in CASES
    assert [e.name for e in EXERCISES if e.number == 21] == ["alibi"]
    assert npformer.t04_attention.ATTENTION_KERNELS["alibi"] is ALiBiAttention
