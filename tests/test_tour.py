"""The `npformer tour` and `npformer gradcheck` commands, run as a user would."""
import subprocess
import sys

import pytest

from npformer.cli import main
from npformer.tour import tour


def test_tour_prints_each_stage_and_the_first_and_last_rows(capsys):
    assert main(["tour"]) == 0
    out = capsys.readouterr().out
    for shape in ("[1, 8, 8]", "[1, 2, 8, 4]", "[1, 2, 8, 8]", "[1, 8, 50]"):
        assert shape in out
    assert "first row [1.000 0.000 0.000 0.000 0.000 0.000 0.000 0.000]" in out


def test_tour_variants_four_heads_and_no_mask():
    lines = []
    logits, cache = tour(n_heads=4, causal=False, out=lines.append)
    assert logits.shape == (1, 8, 50) and cache.attention(0).shape == (1, 4, 8, 8)
    assert (cache.attention(0)[0, :, 0, 1:] > 0).all()


def test_tour_rejects_bad_heads(capsys):
    assert main(["tour", "--heads", "3"]) == 2
    assert "--heads: width 8 must be divisible" in capsys.readouterr().err


@pytest.mark.slow
def test_gradcheck_command_passes_every_component():
    result = subprocess.run([sys.executable, "-m", "npformer.cli", "gradcheck"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout and "components within 1e-06" in result.stdout
    assert "DecoderLM" in result.stdout
