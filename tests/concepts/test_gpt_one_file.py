"""npformer/gpt.py, the whole model in one file, against the library it summarises.

Its loss and every gradient equal DecoderLM's (with npformer.t11_loss.cross_entropy) on the
GPT-2 recipe, its AdamW step equals npformer.t19_optim.AdamW's, and its own training
(``python -m npformer.gpt``) learns to reverse digit strings it never saw.
"""
import ast
from pathlib import Path

import numpy as np
import pytest

import npformer
from npformer import gpt
from npformer.training.data import reverse_task
from npformer.t11_loss import IGNORE_INDEX, cross_entropy
from npformer.t10_model import DecoderConfig, DecoderLM
from npformer.t19_optim import AdamW
from npformer.core.track import TRACKS

GPT_FILE = Path(gpt.__file__)
N_HEADS = 4
CONFIG = gpt.make_config(vocab_size=19, max_len=9, d=16, n_layers=2, n_heads=N_HEADS)


def relative_error(ours, reference):
    """max |ours - reference| / max |reference| (0 when both are zero)."""
    scale = np.max(np.abs(reference))
    return float(np.max(np.abs(ours - reference)) / scale) if scale else float(np.max(np.abs(ours)))


def perturbed_model(rng):
    """A float64 GPT-2-style DecoderLM whose every parameter is random (gains far from 1,
    biases far from 0), so no gradient term can hide behind a default value."""
    config = DecoderConfig.gpt2(vocab_size=19, d_model=16, n_heads=N_HEADS, n_layers=2, max_len=9,
                                norm_eps=CONFIG["eps"])
    model = DecoderLM(config, rng, np.float64)
    for name, p in model.named_parameters():
        if name.endswith("gamma"):
            p.data[...] = 1 + 0.3 * rng.standard_normal(p.shape)
        elif p.data.ndim == 1:
            p.data[...] = 0.2 * rng.standard_normal(p.shape)
        else:
            p.data[...] = 0.3 * rng.standard_normal(p.shape)
    return model


def batch(rng, B=3, N=7, V=19):
    ids = rng.integers(0, V, (B, N))
    targets = rng.integers(0, V, (B, N))
    targets[0, :3] = IGNORE_INDEX                  # a prompt that is not scored
    targets[2, -1] = IGNORE_INDEX
    targets[1, 4] = IGNORE_INDEX
    return ids, targets


@pytest.mark.parametrize("track", TRACKS)
def test_loss_and_every_gradient_equal_decoderlm(rng, track):
    model = perturbed_model(rng)
    ids, targets = batch(rng)
    with npformer.track(track):
        logits, cache = model.forward(ids)
        loss, d_logits = cross_entropy(logits, targets)
        model.zero_grad()
        model.backward(d_logits, cache)
    expected = {name: p.grad for name, p in model.named_parameters()}

    params = model.state_dict()
    assert "head.weight" not in params                          # the head is tied
    our_logits, our_loss, our_cache = gpt.forward(params, CONFIG, ids, targets)
    grads = gpt.backward(params, our_cache)

    assert relative_error(our_logits, logits) <= 1e-12
    assert abs(our_loss - loss) <= 1e-12 * abs(loss)
    assert set(grads) == set(expected)
    for name in expected:
        assert np.abs(expected[name]).max() > 0, name           # every gradient is exercised
        assert relative_error(grads[name], expected[name]) <= 1e-12, name


def test_gradient_matches_finite_differences_on_a_few_entries(rng):
    # an independent check of backward that does not go through DecoderLM
    config = gpt.make_config(vocab_size=11, max_len=6, d=8, n_layers=1, n_heads=2, std=0.3)
    params = gpt.init_params(config, rng, dtype=np.float64)
    params["blocks.0.norm2.gamma"] = 1 + 0.3 * rng.standard_normal(8)
    params["blocks.0.ffn.up.bias"] = 0.3 * rng.standard_normal(32)
    ids, targets = rng.integers(0, 11, (2, 5)), rng.integers(0, 11, (2, 5))
    targets[1, :2] = IGNORE_INDEX
    _, _, cache = gpt.forward(params, config, ids, targets)
    grads = gpt.backward(params, cache)
    for name in ("tokens.weight", "blocks.0.attn.qkv.weight", "blocks.0.norm2.gamma",
                 "blocks.0.ffn.up.bias", "positions.weight", "norm.beta"):
        for index in [tuple(rng.integers(0, n) for n in params[name].shape) for _ in range(3)]:
            h, saved = 1e-6, params[name][index]
            params[name][index] = saved + h
            up = gpt.forward(params, config, ids, targets)[1]
            params[name][index] = saved - h
            down = gpt.forward(params, config, ids, targets)[1]
            params[name][index] = saved
            assert grads[name][index] == pytest.approx((up - down) / (2 * h), rel=1e-6, abs=1e-9)


def test_adamw_step_equals_npformer_adamw_over_three_steps(rng):
    model = perturbed_model(rng)
    optimizer = AdamW(model.named_parameters(), lr=0.05, betas=(0.9, 0.98), weight_decay=0.1)
    params, state = model.state_dict(), {}
    decayed = {name for name, keep in optimizer.decayed.items() if keep}
    assert decayed == {name for name, w in params.items() if gpt.decays(name, w)}
    for _ in range(3):
        grads = {name: rng.standard_normal(w.shape) for name, w in params.items()}
        for name, p in model.named_parameters():
            p.grad[...] = grads[name]
        optimizer.step()
        gpt.adamw_step(params, grads, state, lr=0.05, betas=(0.9, 0.98), weight_decay=0.1)
        for name, p in model.named_parameters():
            assert relative_error(params[name], p.data) <= 1e-12, name


def test_its_task_is_the_librarys_reverse_task_with_unseen_heldout_strings():
    train, heldout = gpt.reverse_task(300, 50, 5, np.random.default_rng(1))
    assert train.shape == (300, 13) and heldout.shape == (50, 13)
    text = lambda row: "".join(gpt.SYMBOLS[i] for i in row[1:-1])
    assert all(row[0] == gpt.BOS and row[-1] == gpt.EOS for row in np.concatenate([train, heldout]))
    example = reverse_task(n_train=1, n_heldout=1, length=5).train[0]      # "31415>" -> "51413"
    for row in np.concatenate([train, heldout]):
        prompt, answer = text(row).split(">")
        assert len(prompt) == len(example.prompt) - 1 and answer == prompt[::-1]
    assert not {text(r) for r in train} & {text(r) for r in heldout}
    assert len({text(r) for r in train}) == 300


@pytest.mark.slow
def test_its_own_training_reaches_99_percent_on_heldout_strings():
    config, params, heldout, generated, accuracy = gpt.train_reverse()
    assert config["n_heads"] == 4 and params["positions.weight"].shape[0] == config["max_len"]
    # scored again here from the characters: the prompt's digits reversed, then <eos>
    right = 0
    for row, new in zip(heldout, generated):
        digits = "".join(gpt.SYMBOLS[i] for i in row[1:6])
        answer = "".join(gpt.SYMBOLS[i] for i in new[:5])
        right += answer == digits[::-1] and new[5] == gpt.EOS
    assert right / len(heldout) == accuracy >= 0.99


def test_main_says_what_it_trains_its_progress_and_the_heldout_accuracy(monkeypatch, capsys):
    """`python -m npformer.gpt` trains for a minute or more: it says so at once, then every 25 steps."""
    short = gpt.train_reverse
    monkeypatch.setattr(gpt, "train_reverse", lambda log=None: short(steps=50, log=log))
    gpt.main()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 7 and lines[0].startswith("training a GPT") and "50 steps of 32" in lines[0]
    assert [line.split(":")[0] for line in lines[1:3]] == ["step 25/50", "step 50/50"]
    assert all(line[5] == ">" and len(line) <= 13 for line in lines[3:6])
    assert lines[-1].startswith("held-out accuracy: ") and "of 500 digit strings" in lines[-1]


def test_lengths_past_the_position_table_are_refused(rng):
    config = gpt.make_config(vocab_size=13, max_len=8, d=16, n_layers=1, n_heads=4)
    params = gpt.init_params(config, rng)
    with pytest.raises(ValueError, match="ids: 9 positions, but the position table holds 8"):
        gpt.forward(params, config, rng.integers(0, 13, (1, 9)))
    with pytest.raises(ValueError, match="n_new: 5 prompt ids and 5 new ones need more positions"):
        gpt.generate(params, config, rng.integers(0, 13, (2, 5)), 5)
    assert gpt.generate(params, config, rng.integers(0, 13, (2, 5)), 4).shape == (2, 4)
    with pytest.raises(ValueError, match="n_heads: the width d=16 must be divisible by n_heads"):
        gpt.make_config(vocab_size=13, max_len=8, d=16, n_layers=1, n_heads=3)


def test_float32_stays_float32(rng):
    config = gpt.make_config(vocab_size=13, max_len=8, d=16, n_layers=2, n_heads=4)
    params = gpt.init_params(config, rng)
    ids, targets = rng.integers(0, 13, (2, 8)), rng.integers(0, 13, (2, 8))
    logits, loss, cache = gpt.forward(params, config, ids, targets)
    grads = gpt.backward(params, cache)
    gpt.adamw_step(params, grads, {}, lr=1e-3)
    assert logits.dtype == loss.dtype == np.float32
    assert all(g.dtype == np.float32 for g in grads.values())
    assert all(w.dtype == np.float32 for w in params.values())


def test_the_file_fits_its_cap_and_imports_only_numpy():
    text = GPT_FILE.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 330          # 320, and the lines that report a run's progress
    imported = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import (from npformer)"
            imported.add(node.module.split(".")[0])
    assert imported <= {"numpy", "math", "time"}, imported
