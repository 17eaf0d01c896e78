"""The claims table (worked_examples/CLAIMS.md) and the claims it sends here.

First the table itself: every test it names exists, every worked example it names
exists, every claim it calls shown names at least one test, every claim not shown
says why, every qualitative one says what it leaves out, and its summary line counts
its rows. Then the claims the table shows with
worked examples 12 and 18 to 26 and with tests of their own. Every expected value is
a hand-derivable number, an identity or a property, never a number a script printed.
"""
import ast
import math
import re
from collections import Counter
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from npformer import BlockConfig, DecoderConfig, DecoderLM, FFN, LayerNorm, MoE, build_block
from npformer.worked import list_examples

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "worked_examples" / "CLAIMS.md"
STATUSES = ("exact", "at printed precision", "qualitative", "differs", "not shown")
# the reasons a claim is not shown, as the table's Status list gives them
REASONS = ("interpretive", "needs trained models", "needs a trained", "needs trained", "needs a training",
           "hardware", "a citation", "about the article itself")
SECTIONS = {f"T{i}" for i in range(11)} | {f"O{i}" for i in range(17)} | {"OS"}
_RESULTS = {}


# -- the table ---------------------------------------------------------------------------
def rows():
    """(id, claim, shown by, status) of every row of the claims table."""
    found = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4 and re.fullmatch(r"[TO]\w*\.\d+", cells[0]):
            found.append(tuple(cells))
    return found


def status_of(cell):
    return next(s for s in STATUSES if cell.startswith(s))


def test_ids_are_unique_and_name_a_section_of_an_article():
    ids = [row[0] for row in rows()]
    assert len(ids) >= 140
    assert len(set(ids)) == len(ids), [i for i, n in Counter(ids).items() if n > 1]
    assert {i.split(".")[0] for i in ids} <= SECTIONS


def defined_tests(path):
    """Names of the test functions (and Class::method) defined in a test file, read without importing it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names |= {f"{node.name}::{f.name}" for f in node.body
                      if isinstance(f, ast.FunctionDef) and f.name.startswith("test")}
    return names


def test_every_named_test_exists():
    # Read with ast, not collected: a cross-check module that skips without torch still counts.
    named = {ref for row in rows() for ref in re.findall(r"`(tests/[\w/]+\.py::[\w:]+)`", row[2])}
    assert len(named) >= 100
    missing = []
    for ref in sorted(named):
        path, test = ref.split("::", 1)
        if not (REPO / path).is_file() or test not in defined_tests(REPO / path):
            missing.append(ref)
    assert not missing, f"CLAIMS.md names tests that do not exist: {missing}"


def test_every_named_worked_example_exists():
    named = {ref for row in rows() for ref in re.findall(r"`(worked_examples/[\w.]+\.py)`", row[2])}
    assert len(named) >= 20
    assert not [ref for ref in named if not (REPO / ref).is_file()]


def test_every_status_is_known_and_a_shown_claim_names_a_test():
    status_list = " ".join(TABLE.read_text(encoding="utf-8").split("**Summary:**")[0].split())
    for reason in ("interpretive", "needs trained models", "hardware", "a citation", "about the article itself"):
        assert reason in status_list, f"the table's Status list should give the reason {reason!r}"
    for claim_id, _, shown_by, status in rows():
        assert status.startswith(STATUSES), f"{claim_id}: unknown status {status!r}"
        if status.startswith("not shown"):
            assert re.match(r"not shown: \S.{10,}", status), f"{claim_id}: give the reason"
            reason = status.removeprefix("not shown: ")
            assert reason.startswith(REASONS), f"{claim_id}: {reason!r} is not one of the table's reasons"
        elif status.startswith("qualitative"):
            assert re.match(r"qualitative: \S.{10,}", status), f"{claim_id}: say what is left out"
        else:
            assert "`tests/" in shown_by, f"{claim_id}: {status} but no test named"


def test_the_summary_line_counts_the_rows():
    text = TABLE.read_text(encoding="utf-8")
    summary = re.search(r"\*\*Summary:\*\* (\d+) claims: (\d+) exact, (\d+) at printed precision, "
                        r"(\d+) qualitative, (\d+) differs?, (\d+) not shown", text)
    assert summary, "CLAIMS.md needs its summary line"
    total, *by_status = (int(n) for n in summary.groups())
    counts = Counter(status_of(row[3]) for row in rows())
    assert total == len(rows())
    assert by_status == [counts[s] for s in STATUSES]


def test_reading_the_source_gives_the_tables_counts():
    readme = " ".join((REPO / "docs" / "reading-the-source.md").read_text(encoding="utf-8").split())
    opening = re.search(r"they make (\d+) claims and numbers\. Tests show (\d+) of them: (\d+) "
                        r"exactly, (\d+) at the precision the article prints, (\d+) qualitatively\. "
                        r"The other (\d+) cannot be shown", readme)
    assert opening, "docs/reading-the-source.md needs the claims' counts"
    total, shown, *by_status, not_shown = (int(n) for n in opening.groups())
    counts = Counter(status_of(row[3]) for row in rows())
    assert total == len(rows()) and not_shown == counts["not shown"]
    assert by_status == [counts["exact"], counts["at printed precision"], counts["qualitative"]]
    assert shown == sum(by_status) == total - not_shown - counts["differs"]


# -- the claims the articles state in words, on worked examples 12 and 18 to 26 ----------
def result(number):
    """run() of worked example ``number``, run once, silently."""
    if number not in _RESULTS:
        example = next(e for e in list_examples(REPO / "worked_examples") if e.number == number)
        _RESULTS[number] = example.load().run(out=lambda *_: None)
    return _RESULTS[number]


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def test_averaging_reads_the_same_whatever_the_question_attention_does_not():
    r = result(18)
    assert np.array_equal(r["mean"], [0.5, 0.5])
    np.testing.assert_allclose(r["equal_scores_weights"], [0.5, 0.5], atol=1e-15)  # all scores 0
    np.testing.assert_allclose(r["equal_scores_output"], r["mean"], atol=1e-15)
    w = sigmoid(4 / math.sqrt(2))                    # softmax of [4 / sqrt 2, 0]
    who, when = r["attention"]["who pays?"], r["attention"]["how long?"]
    np.testing.assert_allclose(who["weights"], [w, 1 - w], atol=1e-12)
    np.testing.assert_allclose(when["weights"], [1 - w, w], atol=1e-12)
    np.testing.assert_allclose(who["output"], [w, 1 - w], atol=1e-12)   # values are the unit vectors
    assert r["attention_gap"] == pytest.approx(2 * w - 1, abs=1e-12)


def test_with_x_directly_scores_are_symmetric_and_each_row_matches_itself_best():
    r = result(19)
    np.testing.assert_allclose(r["x_lengths"], math.sqrt(8), rtol=1e-12)
    scores = r["scores"]
    np.testing.assert_allclose(scores, scores.T, atol=1e-12)
    # Cauchy-Schwarz: x_i . x_j <= |x_i| |x_j| = x_i . x_i when the lengths are equal
    assert (scores.argmax(axis=1) == np.arange(5)).all()
    assert (r["weights"].argmax(axis=1) == np.arange(5)).all()


def test_projections_can_make_a_position_look_for_its_predecessor():
    r = result(19)
    c = r["shift_scale"]
    np.testing.assert_allclose(r["raw_projected_scores"], c * np.eye(5, k=-1), atol=1e-9)
    assert np.abs(r["shift_scores"] - r["shift_scores"].T).max() > 1
    weights = r["shift_weights"]
    assert weights[0, 0] == pytest.approx(1.0)
    for i in range(1, 5):                            # causal row i: i other keys with score 0
        big = math.exp(c / math.sqrt(8))
        assert weights[i, i - 1] == pytest.approx(big / (big + i), abs=1e-9)


def test_a_value_projection_passes_only_what_it_selects():
    r = result(19)
    w_direct = sigmoid(1 / 2)                        # score [1, 0] / sqrt(4)
    np.testing.assert_allclose(r["direct_weights"], [w_direct, 1 - w_direct], atol=1e-12)
    np.testing.assert_allclose(r["direct_output"], [w_direct, 1 - w_direct] * 2, atol=1e-12)
    w = sigmoid(4 / math.sqrt(2))                    # score [4, 0] / sqrt(2)
    np.testing.assert_allclose(r["projected_weights"], [w, 1 - w], atol=1e-12)
    np.testing.assert_allclose(r["projected_output"], [w, 1 - w], atol=1e-12)   # conditions only
    np.testing.assert_array_equal(r["changed_weights"], r["projected_weights"])
    np.testing.assert_allclose(r["changed_output"], [0, 1], atol=1e-12)


def test_scaled_scores_grow_without_bound():
    scores = result(20)["scores"]
    for a, score in scores.items():
        assert score == pytest.approx(a * a / 2, rel=1e-9)            # a^2 / sqrt(4)
    assert scores[10.0] == pytest.approx(50) and scores[4.0] == pytest.approx(16 * scores[1.0])


def test_scaled_score_spread_is_the_entries_variance_at_every_width():
    for (s, D), std in result(20)["stds"].items():
        assert std == pytest.approx(s * s, rel=0.03), (s, D)          # Var(q.k) = D s^4


def test_a_large_score_gap_saturates_softmax_and_its_gradient():
    rows_ = result(20)["saturation"]
    for gap, (weights, d_scores) in rows_.items():
        w = sigmoid(gap)
        np.testing.assert_allclose(weights, [w, 1 - w], rtol=1e-6)
        assert d_scores[0] == pytest.approx(w * (1 - w), rel=1e-6)
        assert d_scores[1] == pytest.approx(-w * (1 - w), rel=1e-6)
    first = rows_[1 / math.sqrt(2)][0]
    assert abs(first[0] - 0.670) < 5e-4                                 # the tutorial's weights


def test_position_tables_stop_and_rope_does_not():
    r = result(21)
    assert all(message and "16" in message for message in r["refused"].values())
    assert r["rope_norm_gap"] < 1e-12


def test_slow_rope_pairs_never_turn_within_the_trained_length():
    r = result(21)
    for base, count in r["pairs_never_turning"].items():
        by_hand = sum(4095 * base ** (-2 * i / 128) < 2 * math.pi for i in range(64))
        assert count == by_hand
    # base 10,000: pair i turns less than once iff i > 64 log(4095 / 2 pi) / log(10^4) = 45.02
    assert r["pairs_never_turning"][10_000.0] == 64 - 46
    assert r["slowest_angle"][10_000.0] == pytest.approx(4095 * 10_000 ** (-126 / 128), rel=1e-9)


def test_interpolated_positions_overshoot_by_half_a_step():
    # position 8191 squeezed by 4096 / 8192 is 4095.5: half a step past the trained 4095
    np.testing.assert_allclose(result(21)["interpolated_overshoot_in_steps"], 0.5, atol=1e-9)


def test_silent_sublayers_give_the_identity_with_residuals_and_zero_without():
    r = result(22)["silent"]
    np.testing.assert_array_equal(r["residual_output"], r["input"])
    np.testing.assert_array_equal(r["residual_grad"], r["upstream"])
    assert not r["plain_output"].any() and not r["plain_grad"].any()


def test_without_residuals_a_deep_stack_loses_the_input_and_its_gradient():
    r = result(22)
    deep = r[64]
    assert deep["plain"]["input_effect"] < 1e-2 * deep["residual"]["input_effect"]
    assert deep["plain"]["spread"] < 1e-6 < 0.5 < deep["residual"]["spread"]
    assert deep["plain"]["grad_ratio"] < 1e-2 and 0.5 < deep["residual"]["grad_ratio"] < 2
    effects = [r[depth]["plain"]["input_effect"] for depth in (1, 4, 16, 64)]
    assert effects == sorted(effects, reverse=True)


def test_one_heads_answer_is_a_mix_of_its_answers_to_the_single_fact_contexts():
    r = result(23)
    assert max(r["identity_gaps"]) < 1e-12
    assert min(r["random_errors"]) >= 1 / 3 - 1e-12


def test_one_head_cannot_beat_one_third_and_two_heads_can():
    trained = result(23)["trained"]
    assert 1 / 3 - 1e-9 <= trained[1]["loss"] <= 1 / 3 + 1e-3
    np.testing.assert_allclose(trained[1]["weights"][2, 0], [0.5, 0.5], atol=1e-2)  # s = 1/2
    assert trained[2]["loss"] < 1e-3


def test_with_wq_held_at_zero_two_heads_cannot_beat_one_third():
    frozen = result(23)["trained"]["frozen queries"]
    np.testing.assert_array_equal(frozen["weights"], 0.5)               # every score 0
    assert 1 / 3 - 1e-9 <= frozen["loss"] <= 1 / 3 + 1e-3                # s = 1/2: s / (1 + s)
    assert result(23)["trained"][2]["loss"] < 1e-3                       # Wq, Wk learned


def test_the_output_is_one_mix_of_the_value_rows():
    r = result(24)["mix"]
    w_a = sigmoid(1 / math.sqrt(2))                                      # 0.66976
    np.testing.assert_allclose(r["shares"], [[2 * w_a, 0], [0, 4 * (1 - w_a)]], atol=1e-12)
    np.testing.assert_allclose(r["output"], r["shares"].sum(axis=0), atol=1e-12)
    assert min(np.abs(r["output"] - v).max() for v in r["values"]) > 0.5  # no single row returned
    assert abs(r["output"][1] - 1.321) < 5e-4                            # all of it B's share


def test_for_fixed_weights_attention_is_linear_in_v():
    r = result(24)["linear"]
    w1, w2, w_mix = r["weights"]
    np.testing.assert_array_equal(w1, w2)                                # V does not enter the weights
    np.testing.assert_array_equal(w1, w_mix)
    assert r["gap"] < 1e-12


def test_a_high_weight_is_not_a_large_effect():
    r = result(24)["effect"]
    w = np.array([0.90, 0.08, 0.02])
    values = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 10.0]])
    np.testing.assert_allclose(r["weights"], w, atol=1e-12)
    output = w @ values                                                  # [0.08, 0.2]
    np.testing.assert_allclose(r["output"], output, atol=1e-12)
    for j, name in enumerate("ABC"):
        np.testing.assert_allclose(r["zeroed"][name], -w[j] * values[j], atol=1e-12)
        # deleting j: the rest renormalised, (out - w_j v_j) / (1 - w_j) - out
        np.testing.assert_allclose(r["deleted"][name], w[j] * (output - values[j]) / (1 - w[j]),
                                   atol=1e-12)
    assert not r["zeroed"]["A"].any() and np.abs(r["zeroed"]["C"]).max() == pytest.approx(0.2)


def test_a_head_that_wo_does_not_read_changes_nothing():
    r = result(24)["wo"]
    assert r["head0_moved"] > 0.1 and r["output_gap"] < 1e-12


def test_linear_layers_stay_one_line_and_relu_layers_multiply_the_pieces():
    r = result(25)
    x = np.linspace(0.0, 1.0, 4097)
    line = r["linear_output"][:, 0]
    assert line[0] == 0 and np.ptp(line[1:] / x[1:]) < 1e-12 and r["linear_pieces"] == 1
    for k, zigzag in r["zigzag"].items():
        by_hand = 1 - np.abs(2 * np.mod(2 ** (k - 1) * x, 1.0) - 1)      # t(frac(2^(k-1) x))
        by_hand[-1] = 0.0                                                # x = 1: t(1) = 0
        np.testing.assert_allclose(zigzag[:, 0], by_hand, atol=1e-12)
        assert r["zigzag_pieces"][k] == 2 ** k                           # from 2k hidden units


def test_one_hidden_layer_is_straight_between_its_bends():
    r = result(25)
    assert len(r["wide_bends"]) == 12 and r["wide_pieces"] <= 13
    assert r["wide_straight_gap"] < 1e-12


def test_without_norms_the_scale_of_a_deep_stack_multiplies():
    r = result(26)
    depths = (1, 4, 16, 64)
    plain, pre, post = (r[name]["rms"] for name in ("no norms", "Pre-Norm", "Post-Norm"))
    growth = [plain[d] for d in depths]
    assert growth == sorted(growth) and plain[64] > 1e10 * plain[1]
    assert plain[64] / plain[16] > plain[16] / plain[4] > 1                # faster on a log scale
    assert pre[64] / pre[16] < 64 / 16 and pre[64] < 1e-10 * plain[64]    # slower than the depth
    np.testing.assert_allclose([post[d] for d in depths], 1, atol=1e-4)  # LayerNorm: RMS 1 (eps aside)
    np.testing.assert_allclose(r["Pre-Norm"]["read"], 1, atol=1e-4)
    small = r["no norms, std 0.02"]
    assert 1 < small[64] < 1e-10 * plain[64]


def test_query_heads_of_one_group_get_different_weights():
    r = result(12)
    weights, shared = r["group_weights"], r["shared_query_weights"]          # [32, N, N]
    for g in range(8):
        for i, j in combinations(range(4 * g, 4 * g + 4), 2):
            assert np.abs(weights[i] - weights[j]).max() > 1e-3, (i, j)
            np.testing.assert_allclose(shared[i], shared[j], atol=1e-12)
    np.testing.assert_allclose(weights.sum(axis=-1), 1, atol=1e-12)


# -- claims with no other test ----------------------------------------------------------
def test_ffn_is_the_same_function_at_every_position(rng):
    ffn = FFN(6, rng=rng, dtype=np.float64)
    ffn.up.bias.data[...] = rng.standard_normal(24)
    x = rng.standard_normal((2, 5, 6))
    rows_alone = np.stack([np.stack([ffn(x[b, n][None])[0] for n in range(5)]) for b in range(2)])
    np.testing.assert_allclose(ffn(x), rows_alone, atol=1e-12)


def test_epsilon_keeps_a_constant_vector_finite():
    constant = np.full((1, 4), 3.0)                  # variance 0
    np.testing.assert_array_equal(LayerNorm(4, eps=1e-5, dtype=np.float64)(constant), 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        assert np.isnan(LayerNorm(4, eps=0.0, dtype=np.float64)(constant)).all()   # 0 / 0


def test_the_learnable_gain_sets_the_output_scale(rng):
    norm = LayerNorm(8, eps=0.0, dtype=np.float64)
    norm.gamma.data[...] = 2.5
    y = norm(rng.standard_normal((3, 8)))
    np.testing.assert_allclose(y.std(axis=-1), 2.5, rtol=1e-12)


def test_without_the_mask_a_later_token_changes_an_earlier_output(rng):
    model = DecoderLM(DecoderConfig(causal=False), rng, np.float64)
    ids = np.array([[3, 8, 12, 5, 17, 42, 23, 6]])
    later = ids.copy()
    later[0, -1] = 7
    assert np.abs(model(ids)[0, 0] - model(later)[0, 0]).max() > 1e-9    # position 0 saw the end


@pytest.mark.parametrize("positions, same", [("none", True), ("learned", False)])
def test_a_causal_mask_alone_cannot_order_the_earlier_tokens(positions, same):
    model = DecoderLM(DecoderConfig(positions=positions), np.random.default_rng(5), np.float64)
    ids = np.array([[3, 8, 12, 5]])
    swapped = ids[:, [1, 0, 2, 3]]                   # the first two tokens exchanged
    gap = np.abs(model(ids)[0, 2:] - model(swapped)[0, 2:]).max()
    assert (gap < 1e-12) == same                     # without positions a prefix is a set


def test_a_block_still_changes_and_mixes_what_its_residual_carries(rng):
    block = build_block(BlockConfig(d_model=8, n_heads=2), rng, np.float64)   # causal
    x = rng.standard_normal((1, 5, 8))
    y = block(x)
    assert (np.abs(y - x).max(axis=-1) > 1e-3).all()                 # every position is changed
    nudged = x.copy()
    nudged[0, 0] += rng.standard_normal(8)                           # only position 0's input
    assert np.abs(block(nudged)[0, 4] - y[0, 4]).max() > 1e-3        # ... moves position 4's output


# -- claims the table once missed ------------------------------------------------------------
def test_renaming_the_ids_changes_nothing_but_their_names(rng):
    model = DecoderLM(DecoderConfig(), rng, np.float64)
    ids = np.array([[3, 8, 12, 5, 17, 42, 23, 6]])
    rename = rng.permutation(50)                                     # id i is called rename[i]
    renamed = DecoderLM(DecoderConfig(), rng, np.float64)
    renamed.load_state_dict(model.state_dict())
    renamed.tokens.weight.data[rename] = model.tokens.weight.data    # row i moves to rename[i]
    renamed.head.weight.data[:, rename] = model.head.weight.data     # and so does its logit
    np.testing.assert_allclose(renamed(rename[ids])[..., rename], model(ids), atol=1e-12)


def test_a_blocks_parameters_are_attention_and_the_mlp_but_4d(rng):
    block = DecoderLM(DecoderConfig(), rng).blocks[0]                # d = 8
    owners = Counter()
    for name, p in block.named_parameters():
        owners[name.split(".")[0]] += p.data.size
    assert owners["attn"] == 8 * 24 + 8 * 8                          # [Wq Wk Wv] and Wo, no biases
    assert owners["ffn"] == 8 * 32 + 32 + 32 * 8 + 8                 # width 4d, with biases
    assert owners["norm1"] + owners["norm2"] == 4 * 8                # a gain and a shift each
    assert sum(owners.values()) == block.num_parameters()


def test_equal_length_input_needs_only_the_causal_mask(rng):
    model = DecoderLM(DecoderConfig(), rng, np.float64)
    ids = np.array([[3, 8, 12, 5, 17, 42, 23, 6], [1, 2, 3, 4, 5, 6, 7, 9]])
    causal = np.tril(np.ones((8, 8), bool))                          # query i may read keys j <= i
    weights = model.forward(ids)[1].attention(0)                     # [B, H, 8, 8]
    assert (weights[..., ~causal] == 0).all() and (weights[..., causal] > 0).all()
    no_padding = np.ones((2, 8), bool)                               # every position is a real token
    np.testing.assert_allclose(model(ids, key_mask=no_padding), model(ids), atol=1e-15)


def test_the_logits_are_the_head_of_the_final_layernorm(rng):
    model = DecoderLM(DecoderConfig(), rng, np.float64)
    model.norm.gamma.data[...] = rng.uniform(0.5, 2.0, 8)            # not the identity
    model.norm.beta.data[...] = rng.standard_normal(8)
    ids = np.array([[3, 8, 12, 5, 17, 42, 23, 6]])
    x = model.tokens.weight.data[ids] + model.positions.weight.data[:8]
    h = model.blocks[0](x)                                           # the one block's output
    mean, var = h.mean(axis=-1, keepdims=True), h.var(axis=-1, keepdims=True)
    normed = (h - mean) / np.sqrt(var + 1e-5) * model.norm.gamma.data + model.norm.beta.data
    np.testing.assert_allclose(model(ids), normed @ model.head.weight.data, atol=1e-12)
    assert model.config.tie_embeddings is False                      # the head is its own matrix


def test_the_position_table_holds_16_positions(rng):
    model = DecoderLM(DecoderConfig(), rng)
    assert model.positions.weight.shape == (16, 8)
    assert model(np.zeros((1, 16), int)).shape == (1, 16, 50)
    with pytest.raises(ValueError, match="max_len 16"):
        model(np.zeros((1, 17), int))


def test_equal_parameter_counts_can_hide_four_times_the_work(rng):
    dense = FFN(16, hidden=128, activation="gelu", bias=False, rng=rng)
    moe = MoE(16, 8, top_k=2, hidden=16, expert="gelu", rng=rng)
    assert dense.num_parameters() == 2 * 16 * 128 == 4096
    assert moe.num_parameters() == 8 * 2 * 16 * 16 + 16 * 8 == 4096 + 128   # experts + router
    assert moe.active_parameters() == 2 * 2 * 16 * 16 + 16 * 8 == 1024 + 128


def test_a_sentence_is_a_matrix_whose_rows_are_token_plus_position():
    """T1.1: four positions of eight numbers are a 4 x 8 matrix X, row i for position i;
    T6.3: x_i = token_embedding_i + position_embedding_i, so one token at two places is two rows."""
    from npformer.t01_embedding import Embedding, Embeddings, LearnedPositions
    rng = np.random.default_rng(0)
    tokens, positions = Embedding(10, 8, rng, dtype=np.float64), LearnedPositions(16, 8, rng, dtype=np.float64)
    ids = np.array([[3, 5, 3, 7]])                             # token 3 at positions 0 and 2
    x = Embeddings(tokens, positions)(ids)
    assert x.shape == (1, 4, 8)                                # one sentence: X is 4 x 8
    for i, token in enumerate(ids[0]):
        assert np.array_equal(x[0, i], tokens.weight.data[token] + positions.weight.data[i])
    assert not np.allclose(x[0, 0], x[0, 2])                   # the same token, two vectors
    lines = []
    example = next(e for e in list_examples(REPO / "worked_examples") if e.number == 3)
    example.load().run(out=lines.append)
    assert any(line.startswith("1. X has shape [4, 8]: 4 positions of 8 numbers") for line in lines)
