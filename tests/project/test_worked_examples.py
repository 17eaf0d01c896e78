"""The worked examples reproduce the tutorial's hand calculations.

Every expected value below is a figure printed in the tutorial (checked at the
precision it is printed with: 0.670 means |x - 0.670| < 0.0005) or a
mathematical fact computed here independently; none is pasted from a
script's output. Also: each script runs as ``python worked_examples/X.py``,
and ``npformer examples`` finds, lists and runs them.
"""
import importlib.util
import math
import os
import re
import shutil
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest

from npformer import cli
from npformer import worked as examples
from npformer.cli.common import UsageError
from npformer.cli import examples as examples_command
from npformer.worked import ExampleNotFound

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "worked_examples"
SCRIPTS = sorted(p for p in FOLDER.glob("[0-9][0-9]_*.py") if int(p.name[:2]) < 90)
_RESULTS = {}


def tutorial(x, figure, decimals=3):
    """True when ``x`` rounds to the tutorial's printed ``figure`` (arrays elementwise)."""
    gap = np.abs(np.asarray(x, dtype=np.float64) - np.asarray(figure))
    return bool(np.all(gap < 0.5 * 10.0 ** -decimals))


def script(prefix):
    """The imported script whose name starts with ``prefix`` (e.g. "02")."""
    path = next(p for p in SCRIPTS if p.name.startswith(prefix + "_"))
    spec = importlib.util.spec_from_file_location(f"we_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def result(prefix):
    """run() of the script whose name starts with ``prefix``, run once, silently."""
    if prefix not in _RESULTS:
        _RESULTS[prefix] = script(prefix).run(out=lambda *_: None)
    return _RESULTS[prefix]


def printed(prefix):
    """Everything the script prints."""
    lines = []
    script(prefix).run(out=lines.append)
    return "\n".join(lines)


# -- every script runs on its own -----------------------------------------------------
def test_scripts_are_numbered_in_order_and_listed_in_the_readme():
    numbers = [int(p.name[:2]) for p in SCRIPTS]
    assert numbers == list(range(1, len(SCRIPTS) + 1))
    readme = (FOLDER / "README.md").read_text(encoding="utf-8")
    for path in SCRIPTS:
        assert path.name in readme, f"{path.name} missing from worked_examples/README.md"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_script_runs_as_a_program(path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120)          # this clone's npformer, not an installed one
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) >= 5


# -- 01 token vectors ---------------------------------------------------------------------
def test_token_vector_has_4096_numbers():
    r = result("01")
    assert r["width"] == 4096 and tuple(r["vector_shape"]) == (1, 1, 4096)
    assert r["bytes_per_token"] == 4096 * 4                  # float32
    assert r["same_row_before"] is True                       # a lookup ignores the context
    assert r["context_gap_after"] > 1e-3                      # a block does not


# -- 02 attention by hand --------------------------------------------------------------------
def test_attention_by_hand_matches_the_tutorial():
    r = result("02")["first"]
    assert np.array_equal(r["scores"], [1.0, 0.0])
    assert tutorial(r["scaled"], [0.707, 0.0])
    assert tutorial(r["exp"][0], 2.028)
    assert tutorial(r["weights"], [0.670, 0.330])
    assert tutorial(r["output"], [1.340, 1.321])


def test_the_second_component_rounds_to_1321_from_the_unrounded_weight():
    r = result("02")["first"]
    w_b = 1 / (1 + math.exp(1 / math.sqrt(2)))               # the unrounded weight of B, 0.33024
    assert r["output"][1] == pytest.approx(4 * w_b, abs=1e-12)
    assert tutorial(4 * w_b, 1.321)                          # 1.32095: the article's figure
    assert np.allclose(r["rounded_sum"], [0.670 * 2, 0.330 * 4], atol=1e-12)   # [1.340, 1.320]
    text = printed("02")
    assert "1.32095" in text and "[1.340, 1.320]" in text
    assert "slip" not in text                                # the article's "≈" is right


def test_changing_the_second_key_swaps_the_mix():
    r = result("02")["changed_key"]
    assert np.array_equal(r["scores"], [1.0, 2.0])
    w_b = 1 / (1 + math.exp(-(2 - 1) / math.sqrt(2)))        # softmax of two scores = sigmoid of the gap
    assert np.allclose(r["weights"], [1 - w_b, w_b], atol=1e-12)
    assert tutorial(r["weights"], [0.330, 0.670])             # the first case's numbers, swapped
    assert np.allclose(r["output"], [2 * (1 - w_b), 4 * w_b], atol=1e-12)


def test_scaling_by_sqrt_d_keeps_the_spread_near_one():
    r = result("02")
    for D, (raw, scaled) in r["spread"].items():
        assert abs(raw / math.sqrt(D) - 1) < 0.05
        assert abs(scaled - 1) < 0.05
    assert r["peak_unscaled"] > r["peak_scaled"]


# -- 03 score matrix and causal table ----------------------------------------------------------
def test_causal_table_and_weights():
    r = result("03")
    assert r["scores"].shape == (4, 4)
    assert np.array_equal(r["causal"], np.tril(np.ones((4, 4), bool)))   # itself and earlier ones
    assert r["readable"].tolist() == [1, 2, 3, 4]
    weights = r["weights"]
    assert np.all(weights[np.triu_indices(4, 1)] == 0)                  # the future gets exactly 0
    assert np.allclose(weights.sum(axis=1), 1, atol=1e-6)
    assert r["weights_match_masked_softmax"] is True


def test_left_padding_is_never_read():
    padded = result("03")["padded_weights"]
    assert not np.isnan(padded).any()
    assert np.all(padded[:, :2] == 0)                       # the two padding columns
    assert np.all(padded[:2] == 0)                          # padding rows read nothing
    assert np.allclose(padded[2:].sum(axis=1), 1, atol=1e-6)


# -- 04 multi-head shapes -------------------------------------------------------------------------
def test_multi_head_shapes():
    r = result("04")
    B, N = 2, 5
    assert r["head_dim"] == 8 // 2
    s = r["shapes"]
    assert tuple(s["x"]) == (B, N, 8)
    assert tuple(s["q"]) == (B, 2, N, 4) == tuple(s["k"]) == tuple(s["v"])
    assert tuple(s["weights"]) == (B, 2, N, N)               # one [N, N] table per head
    assert tuple(s["merged"]) == (B, N, 8) == tuple(s["output"])
    assert r["head_is_slice"] == [True, True]
    assert r["features_changed_by_one_head"] == 8


# -- 05 positions and RoPE -----------------------------------------------------------------------
def test_rope_rotation_in_two_dimensions():
    r = result("05")
    assert r["same_token_rows"] is True
    assert np.allclose(r["turned"][((1.0, 0.0), 90)], [0, 1], atol=1e-12)
    c, s = math.cos(math.pi / 3), math.sin(math.pi / 3)
    assert np.allclose(r["turned"][((1.0, 2.0), 60)], [1 * c - 2 * s, 1 * s + 2 * c], atol=1e-12)


def test_rope_scores_one_and_a_half():
    scores = result("05")["rope_scores"]
    for label, value in scores.items():
        expected = 1.0 if label.startswith("same") else 0.5     # the tutorial's 1 and 0.5
        assert abs(value - expected) < 1e-9, label


def test_rope_score_depends_only_on_the_offset():
    r = result("05")
    by_pair = r["offset_scores"]
    same_offset = [by_pair[(0, 3)], by_pair[(5, 8)], by_pair[(20, 23)]]
    assert np.allclose(same_offset, r["relative_score"], atol=1e-9)
    assert abs(by_pair[(0, 4)] - by_pair[(0, 3)]) > 1e-3


# -- 06 word order ----------------------------------------------------------------------------------
def test_word_order_needs_positions():
    r = result("06")
    assert r["no_positions_same"] is True and r["no_positions_gap"] < 1e-12
    assert r["learned_same"] is False and r["learned_gap"] > 1e-4
    assert r["causal_no_positions_same"] is False


# -- 07 FFN by hand -------------------------------------------------------------------------------
def test_ffn_by_hand():
    r = result("07")
    assert np.array_equal(r["widened"], [1, -1, 2])
    assert np.array_equal(r["activated"], [1, 0, 2])
    assert np.array_equal(r["output"], [1, 2])


def test_two_linear_layers_collapse_into_one():
    r = result("07")
    w1 = [[1, 0, 1], [0, 1, -1]]
    w2 = [[1, 0], [0, 1], [0, 1]]
    product = [[sum(w1[i][k] * w2[k][j] for k in range(3)) for j in range(2)] for i in range(2)]
    assert np.array_equal(r["merged_weight"], product)
    assert np.array_equal(r["linear_output"], [1 * product[0][0] - product[1][0],
                                               1 * product[0][1] - product[1][1]])
    assert r["collapse_gap"] < 1e-12
    assert r["relu_gap"] > 0.1


# -- 08 gate and residual ----------------------------------------------------------------------------
def test_gate_three_times_point_two():
    r = result("08")
    assert abs(r["value"] - 3) < 1e-12
    assert abs(r["gate"] - 0.2) < 1e-9
    assert tutorial(r["gated_output"], 0.6, decimals=1) and abs(r["gated_output"] - 0.6) < 1e-9


def test_residual():
    r = result("08")
    assert np.allclose(r["residual"], [2.1, 0.8], atol=1e-12)
    assert np.array_equal(r["residual_grad"], r["upstream_grad"])     # the direct path


# -- 09 norms ----------------------------------------------------------------------------------------
def test_layer_norm_and_rms_norm_of_one_three():
    r = result("09")
    assert np.allclose(r["layer_norm"], [-1, 1], atol=1e-12)
    assert tutorial(r["rms_norm"], [0.447, 1.342])
    assert np.allclose(r["rms_norm"], [1 / math.sqrt(5), 3 / math.sqrt(5)], atol=1e-12)
    assert np.allclose(r["layer_norm_eps"], [-1, 1], atol=1e-4)
    assert tutorial(r["rms_norm_eps"], [0.447, 1.342])


def test_prenorm_block_formula_and_postnorm_scale():
    r = result("09")
    assert r["prenorm_gap"] < 1e-12
    y = r["postnorm_output"]                                  # LayerNorm last, gamma 1, beta 0
    assert np.allclose(y.mean(axis=-1), 0, atol=1e-9)
    assert np.allclose(y.std(axis=-1), 1, atol=1e-3)
    assert r["prenorm_std"] > 3


def test_postnorm_is_the_overview_diagram_and_both_placements_are_named():
    assert result("09")["postnorm_gap"] < 1e-12
    text = printed("09")
    for name in ("Pre-Norm", "Post-Norm", "PreNormBlock", "PostNormBlock", "overview"):
        assert name in text


# -- 10 logits to probabilities ------------------------------------------------------------------------
def test_logits_two_one_zero():
    r = result("10")
    assert np.array_equal(r["logits"], [2, 1, 0]) and np.array_equal(r["tied_logits"], [2, 1, 0])
    assert tutorial(r["probabilities"], [0.665, 0.245, 0.090])
    total = math.exp(2) + math.exp(1) + 1
    assert abs(r["loss_if_merchant"] + math.log(math.exp(2) / total)) < 1e-9


# -- 11 the tiny decoder --------------------------------------------------------------------------------
def test_tiny_decoder_shapes_and_attention_rows():
    r = result("11")
    assert tuple(r["logits_shape"]) == (1, 8, 50)
    assert tuple(r["attention_shape"]) == (1, 2, 8, 8)
    one_hot_first = np.zeros(8)
    one_hot_first[0] = 1
    for head_row in r["first_row"]:
        assert np.allclose(head_row, one_hot_first, atol=1e-7)     # reads only position 0
    assert np.all(r["last_row"] > 0)                               # reads all eight
    assert np.allclose(r["last_row"].sum(axis=-1), 1, atol=1e-5)


def test_tiny_decoder_top3_candidates():
    r = result("11")
    z = r["logits"][0, -1].astype(np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    assert set(r["top3"].tolist()) == set(np.argsort(-p)[:3].tolist())
    assert np.allclose(r["top3_probabilities"], np.sort(p)[::-1][:3], atol=1e-6)


def test_tiny_decoder_four_heads_and_no_mask():
    r = result("11")
    assert tuple(r["heads4_attention_shape"]) == (1, 4, 8, 8)
    assert r["heads4_head_dim"] == 2
    assert tuple(r["heads4_logits_shape"]) == (1, 8, 50)
    assert np.all(r["unmasked_first_row"] > 0)                     # the first row reads ahead


# -- 12 GQA ---------------------------------------------------------------------------------------------
def test_gqa_four_query_heads_per_kv_head_and_a_quarter_of_the_cache():
    r = result("12")
    assert r["q_heads"] == 32 and r["kv_heads"] == 8
    assert r["readers"] == [list(range(4 * g, 4 * g + 4)) for g in range(8)]
    assert r["gqa_ratio"] == 0.25
    assert r["mqa_ratio"] == 1 / 32
    layers, batch, capacity, head_dim, itemsize = 1, 1, 128, 2, 4
    assert r["cache_bytes"][32] == 2 * layers * batch * 32 * capacity * head_dim * itemsize


# -- 13 MoE -----------------------------------------------------------------------------------------------
def test_moe_eighty_million_stored_twenty_million_active():
    r = result("13")
    assert r["per_expert"] == 10_000_000
    assert r["experts_total"] == 80_000_000
    assert r["experts_active"] == 20_000_000
    assert r["router"] == 1000 * 8


def test_moe_counts_agree_with_a_real_layer_and_routing_is_top2():
    r = result("13")
    assert r["small_total_measured"] == r["small_counts"].total
    assert r["small_active_measured"] == r["small_counts"].active
    chosen = r["chosen"]
    assert chosen.shape == (6, 2) and np.all(chosen[:, 0] != chosen[:, 1])
    assert sum(r["served"]) == 6 * 2
    assert len({tuple(pair) for pair in chosen.tolist()}) > 1      # tokens pick different experts


# -- 14 KV cache ------------------------------------------------------------------------------------------
def test_kv_cache_counts_and_same_logits():
    r = result("14")
    P, T, L, H = r["prompt_length"], r["new_tokens"], r["layers"], r["heads"]
    assert P == 8                                            # the tutorial's eight ids
    assert r["plain_positions"] == L * sum(P + s for s in range(T))
    assert r["plain_positions"] == L * (T * P + T * (T - 1) // 2)
    assert r["cached_positions"] == L * (P + T - 1)
    assert r["plain_scores"] == L * H * sum((P + s) ** 2 for s in range(T))
    assert r["cached_scores"] == L * H * (P * P + sum(P + s for s in range(1, T)))
    assert r["plain_ids"] == r["cached_ids"] == r["library_ids"]
    assert r["logit_gap"] < 1e-10


# -- 15 attention cost ------------------------------------------------------------------------------------
def test_attention_memory_grows_with_the_square_of_the_length():
    r = result("15")
    for N, (shape, one_head_bytes) in r["measured"].items():
        assert tuple(shape[-2:]) == (N, N)
        assert one_head_bytes == N * N * 4
    assert r["ratios"] == [4.0] * (len(r["measured"]) - 1)
    assert all(size == N * N * 4 for N, size in r["computed"].items())
    for N, (full, windowed) in r["window_entries"].items():
        assert full == N * (N + 1) // 2
        assert windowed == sum(min(i + 1, 64) for i in range(N))


def test_blockwise_attention_memory_is_linear_and_output_the_same():
    r = result("15")
    H, D, itemsize = r["heads"], r["head_dim"], 4
    for N, (plain, blockwise) in r["kept_bytes"].items():
        assert plain == H * N * (3 * D + N) * itemsize          # q, k, v and the N x N weights
        assert blockwise == H * N * (4 * D + 1) * itemsize      # q, k, v, out and one lse per row
    assert r["flash_gap"] < 1e-5


# -- 16 three backbones --------------------------------------------------------------------------------
def test_three_backbones_visibility():
    r = result("16")
    assert r["encoder_rows"] == [8] * 8                      # both directions
    assert r["decoder_rows"] == list(range(1, 9))            # itself and earlier ones
    assert r["self_rows"] == [1, 2, 3, 4]
    assert tuple(r["cross_shape"]) == (1, 2, 4, 6)           # target rows x source columns
    assert r["cross_rows"] == [6] * 4
    assert tuple(r["q_side_shape"]) == (1, 4, 8) and tuple(r["kv_side_shape"]) == (1, 6, 8)
    assert r["source_change_effect"] > 1e-6                  # the first target reads the last source token
    assert r["target_change_effect"] == 0                    # but never a later target token


# -- 17 training ----------------------------------------------------------------------------------------
def test_first_training_steps():
    r = result("17")
    assert abs(r["losses"][0] - math.log(50)) < 0.1          # near-uniform over 50 words at the start
    assert r["losses"][-1] < 0.1 * r["losses"][0]
    assert np.array_equal(r["predicted"], [8, 12, 5, 17, 42, 23, 6])   # the tutorial's ids, shifted


# -- npformer examples ---------------------------------------------------------------------------------
def test_cli_lists_every_example(capsys):
    assert cli.main(["examples", "--list"]) == 0
    listed = capsys.readouterr().out
    for path in SCRIPTS:
        assert path.stem[3:] in listed


@pytest.mark.parametrize("name, figure", [("2", "[0.670, 0.330]"), ("02", "[1.340, 1.321]"),
                                          ("rope", "0.500"), ("logits", "[0.665, 0.245, 0.090]")])
def test_cli_runs_one_example_by_number_or_name(capsys, name, figure):
    assert cli.main(["examples", name]) == 0
    printed = capsys.readouterr().out
    assert figure in printed
    assert printed.count("== ") == 1                         # exactly one example ran


def test_cli_runs_several_examples_in_the_order_given(capsys):
    assert cli.main(["examples", "03", "02"]) == 0
    printed = capsys.readouterr().out
    headings = re.findall(r"^== (\d\d)_", printed, flags=re.M)
    assert headings == ["03", "02"]
    assert "[1.340, 1.321]" in printed                       # 02's output, the article's numbers


def test_cli_unknown_or_ambiguous_name_is_a_usage_error(capsys):
    assert cli.main(["examples", "no-such-example"]) == 2
    assert "no worked example matches" in capsys.readouterr().err
    with pytest.raises(UsageError, match="several"):
        examples_command.run(Namespace(names=["_"], list=False, dir=None))
    with pytest.raises(UsageError, match="no worked example"):
        examples_command.run(Namespace(names=["99"], list=False, dir=None))


@pytest.mark.slow
def test_cli_runs_all_examples(capsys, tmp_path):
    # A copy of this file's scripts (the 90+ pretrained-model examples are tested by their owner).
    for path in SCRIPTS:
        shutil.copy(path, tmp_path / path.name)
    assert cli.main(["examples", "--dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert re.findall(r"^== (\d\d)_", printed, flags=re.M) == [p.name[:2] for p in SCRIPTS]


def test_folder_found_from_the_current_directory_when_the_package_is_elsewhere(monkeypatch, tmp_path):
    # What a non-editable install looks like: the package in site-packages, no worked_examples/ beside it.
    monkeypatch.setattr(examples, "_PACKAGE_DIR", tmp_path / "site-packages" / "npformer")
    assert examples.find_examples_dir(cwd=REPO / "tests") == FOLDER          # found in a parent
    with pytest.raises(ExampleNotFound, match="--dir"):
        examples.find_examples_dir(cwd=tmp_path)
    assert examples.find_examples_dir(explicit=FOLDER) == FOLDER
    with pytest.raises(ExampleNotFound, match="--dir"):
        examples.find_examples_dir(explicit=tmp_path)


@pytest.mark.slow
def test_non_editable_install(tmp_path):
    """pip-install a copy of the repository (not editable), then run the examples from elsewhere."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    for folder in ("npformer", "worked_examples"):
        shutil.copytree(REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    site = tmp_path / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                              "--target", str(site), str(source)],
                             capture_output=True, text=True, timeout=300)
    if install.returncode != 0:
        pytest.skip(f"could not build the package here: {install.stderr[-300:]}")
    shipped = sorted(p.name for p in (site / "npformer" / "worked_examples").glob("[0-9][0-9]_*.py"))
    assert shipped == sorted(p.name for p in FOLDER.glob("[0-9][0-9]_*.py"))
    assert (site / "npformer" / "worked_examples" / "CLAIMS.md").is_file()
    env = {**os.environ, "PYTHONPATH": str(site)}
    # the current folder off sys.path (as -P does from Python 3.11 on)
    command = [sys.executable, "-c", "import sys; sys.path.remove(''); import npformer.cli as c; "
               "assert c.__file__.startswith(sys.argv[1]), c.__file__; "
               "sys.exit(c.main(sys.argv[2:]))", str(site)]
    elsewhere = tmp_path / "elsewhere"                 # no clone in it nor above it
    elsewhere.mkdir()
    listed = subprocess.run(command + ["examples", "--list"], capture_output=True, text=True,
                            cwd=elsewhere, env=env, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "attention_by_hand" in listed.stdout
    ran = subprocess.run(command + ["examples", "2"], capture_output=True, text=True, cwd=elsewhere,
                         env=env, timeout=120)
    assert ran.returncode == 0 and "[1.340, 1.321]" in ran.stdout, ran.stderr
