"""The benchmark harness runs end to end on its quick setting and writes every table.

Timings are never asserted (speed is shown by the benchmark's report, not by tests);
what is checked is the harness: separate worker processes, the tables, the targets
table, the fitted exponents and the FLOP formula.
"""
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import OPENBLAS_VARS, openblas_settings  # noqa: E402
from benchmarks.specs import forward_flops  # noqa: E402
from benchmarks.tables import exponent  # noqa: E402


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One quick run with an OpenBLAS variable set, so both settings are measured.

    OPENBLAS_L2_SIZE only tells OpenBLAS the L2 cache size it blocks for (256 KiB here).
    """
    out = tmp_path_factory.mktemp("bench")
    env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_VARS}
    env["OPENBLAS_L2_SIZE"] = "262144"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--output", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return (out / "quick.md").read_text(), json.loads((out / "quick.json").read_text()), out


@pytest.mark.full          # a whole quick benchmark run: half a minute
def test_quick_run_writes_every_table(quick_run):
    report, _, out = quick_run
    for heading in ("## The training step: forward, mean cross-entropy, backward (no optimizer)",
                    "### OpenBLAS unset (", "## Targets", "### Workers", "### Training step: forward + cross-entropy",
                    "### Training step without the optimizer", "### Forward alone", "### Peak RSS",
                    "## How cost grows", "### Against the sequence length", "### Against the width",
                    "### KV-cached decoding", "### Attention alone"):
        assert heading in report, heading
    assert "| tiny |" in report
    assert "exponent, fit over all sizes" in report
    assert "training step tiny: fast <= 1.00x PyTorch" in report
    assert "training step small: plain <= 2.00x PyTorch" in report
    assert "| config | plain ms | fast ms | fast, 1 threads ms | PyTorch ms | best fast / PyTorch |" in report
    assert "| target | OpenBLAS unset | verdict | OpenBLAS environment | verdict |" in report
    assert "## OpenBLAS environment: OPENBLAS_CORETYPE unset, OPENBLAS_L2_SIZE=262144" in report
    assert (out / "quick-growth.png").exists() or "plot was skipped" in report


@pytest.mark.full
def test_each_library_ran_in_its_own_process_on_its_track(quick_run):
    _, results, _ = quick_run
    workers = results["settings"][0]["workers"]
    assert {"fast", "plain"} <= set(workers)
    pids = {info["pid"] for info in workers.values()}
    assert len(pids) == len(workers) and os.getpid() not in pids
    assert workers["fast"]["track"] == "fast" and workers["plain"]["track"] == "plain"
    assert all(info["threadpools"] for info in workers.values())   # the BLAS kernel is named
    timed = results["settings"][0]["configs"]["tiny"]["train"]
    assert all(len(times) == timed["rounds"] for times in timed["times"].values())
    second = results["settings"][1]
    assert second["label"] == "environment" and "plain" in second["workers"]
    assert set(second["configs"]["tiny"]) == {"train_no_opt", "train", "forward"}


def test_openblas_settings_unset_removes_both_variables():
    env = {"PATH": "/bin", "OPENBLAS_CORETYPE": "Haswell"}
    settings = dict(openblas_settings(env))
    assert set(settings) == {"unset", "environment"}
    assert "OPENBLAS_CORETYPE" not in settings["unset"] and settings["unset"]["PATH"] == "/bin"
    assert settings["environment"]["OPENBLAS_CORETYPE"] == "Haswell"
    assert [label for label, _ in openblas_settings({"PATH": "/bin"})] == ["unset"]


def test_exponent_is_the_slope_of_log_time_against_log_size():
    sizes = [128, 256, 512, 1024]
    assert math.isclose(exponent(sizes, [3 * s ** 2 for s in sizes]), 2.0)
    assert math.isclose(exponent(sizes, [0.5 * s for s in sizes]), 1.0)
    assert math.isclose(exponent(sizes, [7.0] * 4), 0.0, abs_tol=1e-12)


def test_flop_formula_counts_the_matmuls():
    """forward_flops = 2 * tokens * weights + 4 B N^2 d L, checked on a hand-counted config."""
    cfg = dict(vocab=10, d=4, layers=1, heads=2, seq=3, batch=2)
    # qkv 4x12, out 4x4, up 4x16, down 16x4, head 4x10 -> 48 + 16 + 64 + 64 + 40 = 232 weights
    assert forward_flops(cfg) == 2 * 6 * 232 + 4 * 2 * 9 * 4 * 1


def test_a_quick_run_writes_where_git_ignores_it():
    from benchmarks.run import default_output
    repo = Path(__file__).resolve().parents[2]
    if shutil.which("git") is None or not (repo / ".git").exists():
        pytest.skip("not a git checkout: nothing to ignore files")
    quick = default_output(quick=True) / "quick.md"
    latest = default_output(quick=False) / "latest.md"
    ignored = [subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=repo).returncode == 0
               for path in (quick, latest)]
    assert ignored == [True, False]           # the smoke run is ignored, the measured run is kept
