"""The benchmark entry point runs on its tiny setting and writes its report (timings never asserted)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_quick_benchmark_runs_and_writes_markdown(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--output", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = (tmp_path / "quick-openblas-unset.md").read_text()
    for section in ("matmul peak", "Training step", "Peak memory", "Decoding", "Attention alone",
                    "GQA", "MoE", "Targets"):
        assert section in report, section
    assert "| tiny |" in report
    assert (tmp_path / "quick-openblas-unset.json").exists()


def test_flop_formula_counts_the_matmuls():
    """forward_flops = 2 * tokens * weights + 4 B N^2 d L, checked on a hand-counted config."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.run import forward_flops
    cfg = dict(vocab=10, d=4, layers=1, heads=2, seq=3, batch=2)
    # qkv 4x12, out 4x4, up 4x16, down 16x4, head 4x10 -> 48 + 16 + 64 + 64 + 40 = 232 weights
    assert forward_flops(cfg) == 2 * 6 * 232 + 4 * 2 * 9 * 4 * 1
