"""The `npformer tour` and `npformer gradcheck` commands, run as a user would.

The tour's shapes are checked against the tutorial's notation with the tiny decoder's
sizes substituted by hand (B 1, N 8, d 8, H heads, D = 8 / H, V 50), and its stages
against the model's own modules and ``DecoderLM.forward``.
"""
import re
import subprocess
import sys

import numpy as np
import pytest

from npformer import DecoderConfig, DecoderLM, causal_mask
from npformer.cli import main
from npformer.cli.tour import TUTORIAL_IDS, tour, walk


def sizes(heads):
    """The tutorial's symbols for the tiny decoder with ``heads`` heads (width 8, 8 ids, 50 words)."""
    return {"B": 1, "N": 8, "d": 8, "3d": 24, "4d": 32, "H": heads, "D": 8 // heads, "V": 50}


def recorded(heads=2, causal=True, seed=7):
    """Every stage of the tour as (text, names, array), and the model it ran."""
    model = DecoderLM(DecoderConfig(n_heads=heads, causal=causal), np.random.default_rng(seed))
    stages = []
    logits, weights = walk(model, TUTORIAL_IDS, causal,
                           lambda text, names, array: stages.append((text, names, array)))
    return stages, model, logits, weights


def find(stages, label):
    """The one array whose stage text contains ``label``."""
    matches = [array for text, _, array in stages if label in text]
    assert len(matches) == 1, (label, [text for text, _, _ in stages])
    return matches[0]


@pytest.mark.parametrize("heads", [1, 2, 4])
def test_every_stage_has_the_shape_its_names_say(heads):
    stages, *_ = recorded(heads)
    size = sizes(heads)
    assert len(stages) >= 15
    for text, names, array in stages:
        expected = tuple(size[symbol] for symbol in re.findall(r"\w+", names))
        assert array.shape == expected, f"{text}: {names} should be {expected}, got {array.shape}"


def test_the_head_reshape_is_shown_and_is_the_modules_split():
    stages, model, _, _ = recorded()
    names = [n for _, n, _ in stages]
    assert names.index("[B, N, H, D]") < names.index("[B, H, N, D]")   # reshape, then transpose
    qkv = find(stages, "fused projection")
    q_split, _, _ = model.blocks[0].attn.split_heads(qkv)
    np.testing.assert_array_equal(find(stages, "heads in front"), q_split)
    np.testing.assert_array_equal(find(stages, "cut into heads").transpose(0, 2, 1, 3), q_split)


@pytest.mark.parametrize("heads, causal", [(2, True), (4, True), (2, False)])
def test_stages_are_the_model(heads, causal):
    """The labels are truthful: "block output" is the block's output, "final norm" the model's norm
    of it, the weights the model's attention, and the walk's logits DecoderLM.forward's."""
    stages, model, logits, weights = recorded(heads, causal)
    expected_logits, cache = model.forward(TUTORIAL_IDS)
    np.testing.assert_allclose(logits, expected_logits, atol=1e-6)
    np.testing.assert_allclose(weights, cache.attention(0), atol=1e-6)
    x = find(stages, "learned positions")
    mask = causal_mask(8) if causal else None
    block_output = model.blocks[0](x, mask)
    np.testing.assert_allclose(find(stages, "block output"), block_output, atol=1e-6)
    np.testing.assert_allclose(find(stages, "final norm"), model.norm(block_output), atol=1e-6)
    np.testing.assert_array_equal(find(stages, "Norm1"), model.blocks[0].norm1(x))


def test_tour_prints_each_stage_the_first_and_last_rows_and_why_its_numbers_differ(capsys):
    assert main(["tour"]) == 0
    out = capsys.readouterr().out
    for shape in ("[1, 8, 8]", "[1, 8, 2, 4]", "[1, 2, 8, 4]", "[1, 2, 8, 8]", "[1, 8, 32]",
                  "[1, 8, 50]"):
        assert shape in out
    assert "first row [1.000 0.000 0.000 0.000 0.000 0.000 0.000 0.000]" in out
    assert "torch.manual_seed(7)" in out and "np.random.default_rng(seed)" in out
    gap = float(re.search(r"largest logit difference (\S+)", out).group(1))
    assert gap < 1e-6


def test_tour_variants_four_heads_and_no_mask():
    lines = []
    logits, cache = tour(n_heads=4, causal=False, out=lines.append)
    assert logits.shape == (1, 8, 50) and cache.attention(0).shape == (1, 4, 8, 8)
    assert (cache.attention(0)[0, :, 0, 1:] > 0).all()
    assert any("[1, 8, 4, 2]" in line for line in lines)            # [B, N, H, D] with H = 4


def test_tour_rejects_bad_heads(capsys):
    assert main(["tour", "--heads", "3"]) == 2
    assert "--heads: width 8 must be divisible" in capsys.readouterr().err


@pytest.mark.crosscheck
def test_tour_model_is_the_tutorials_architecture_in_pytorch():
    """The tour's weights loaded into a PyTorch decoder written from the tutorial's description
    (learned positions, Pre-Norm LayerNorm, fused bias-free Q/K/V, causal softmax, bias-free Wo,
    GELU FFN of width 4d with biases, final LayerNorm, bias-free head) give the same logits."""
    torch = pytest.importorskip("torch")
    model = DecoderLM(DecoderConfig(), np.random.default_rng(7), dtype=np.float64)
    expected, _ = model.forward(TUTORIAL_IDS)
    t = {name: torch.tensor(p.data) for name, p in model.named_parameters()}
    block = "blocks.0."

    def layer_norm(x, name):
        return torch.nn.functional.layer_norm(x, (8,), t[name + ".gamma"], t[name + ".beta"], 1e-5)

    ids = torch.tensor(TUTORIAL_IDS)
    x = t["tokens.weight"][ids] + t["positions.weight"][torch.arange(8)]
    q, k, v = (layer_norm(x, block + "norm1") @ t[block + "attn.qkv.weight"]).chunk(3, dim=-1)
    q, k, v = (z.reshape(1, 8, 2, 4).transpose(1, 2) for z in (q, k, v))
    future = torch.ones(8, 8, dtype=torch.bool).triu(1)
    weights = (q @ k.transpose(-2, -1) / 2.0).masked_fill(future, float("-inf")).softmax(-1)
    mixed = (weights @ v).transpose(1, 2).reshape(1, 8, 8)
    x = x + mixed @ t[block + "attn.out.weight"]
    hidden = layer_norm(x, block + "norm2") @ t[block + "ffn.up.weight"] + t[block + "ffn.up.bias"]
    x = x + torch.nn.functional.gelu(hidden) @ t[block + "ffn.down.weight"] + t[block + "ffn.down.bias"]
    logits = layer_norm(x, "norm") @ t["head.weight"]
    np.testing.assert_allclose(logits.numpy(), expected, rtol=0, atol=1e-12)


@pytest.mark.full          # a minute: the same cases the concept files' tests check one by one
def test_gradcheck_command_passes_every_component():
    result = subprocess.run([sys.executable, "-m", "npformer.cli", "gradcheck"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout and "components within 1e-06" in result.stdout
    assert "DecoderLM" in result.stdout
