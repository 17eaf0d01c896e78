"""npformer/gpt.py, the whole model in one file, against the library it summarises.

Its loss and every gradient equal DecoderLM's (with npformer.t11_loss.cross_entropy) on the
GPT-2 recipe, its AdamW step equals npformer.training.optim.AdamW's, and trained alone it learns
to reverse digit strings.
"""
import ast
import math
from pathlib import Path

import numpy as np
import pytest

import npformer
from npformer import gpt
from npformer.training.data import encode_examples, reverse_task
from npformer.t11_loss import IGNORE_INDEX, cross_entropy
from npformer.t10_model import DecoderConfig, DecoderLM
from npformer.training.optim import AdamW
from npformer.training.tokenizer import CharTokenizer
from npformer.core.track import TRACKS
from npformer.runtime.cores import limit_blas_threads

GPT_FILE = Path(gpt.__file__)
N_HEADS = 4


def relative_error(ours, reference):
    """max |ours - reference| / max |reference| (0 when both are zero)."""
    scale = np.max(np.abs(reference))
    return float(np.max(np.abs(ours - reference)) / scale) if scale else float(np.max(np.abs(ours)))


def perturbed_model(rng):
    """A float64 GPT-2-style DecoderLM whose every parameter is random (gains far from 1,
    biases far from 0), so no gradient term can hide behind a default value."""
    config = DecoderConfig.gpt2(vocab_size=19, d_model=16, n_heads=N_HEADS, n_layers=2, max_len=9)
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
    our_logits, our_loss, our_cache = gpt.forward(params, ids, targets, n_heads=N_HEADS)
    grads = gpt.backward(params, our_cache)

    assert relative_error(our_logits, logits) <= 1e-12
    assert abs(our_loss - loss) <= 1e-12 * abs(loss)
    assert set(grads) == set(expected)
    for name in expected:
        assert np.abs(expected[name]).max() > 0, name           # every gradient is exercised
        assert relative_error(grads[name], expected[name]) <= 1e-12, name


def test_gradient_matches_finite_differences_on_a_few_entries(rng):
    # an independent check of backward that does not go through DecoderLM
    params = gpt.init_params(11, 6, 8, 1, rng, std=0.3, dtype=np.float64)
    params["blocks.0.norm2.gamma"] = 1 + 0.3 * rng.standard_normal(8)
    params["blocks.0.ffn.up.bias"] = 0.3 * rng.standard_normal(32)
    ids, targets = rng.integers(0, 11, (2, 5)), rng.integers(0, 11, (2, 5))
    targets[1, :2] = IGNORE_INDEX
    _, _, cache = gpt.forward(params, ids, targets, n_heads=2)
    grads = gpt.backward(params, cache)
    for name in ("tokens.weight", "blocks.0.attn.qkv.weight", "blocks.0.norm2.gamma",
                 "blocks.0.ffn.up.bias", "positions.weight", "norm.beta"):
        for index in [tuple(rng.integers(0, n) for n in params[name].shape) for _ in range(3)]:
            h, saved = 1e-6, params[name][index]
            params[name][index] = saved + h
            up = gpt.forward(params, ids, targets, n_heads=2)[1]
            params[name][index] = saved - h
            down = gpt.forward(params, ids, targets, n_heads=2)[1]
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


def reverse_rows(tok, examples):
    """(inputs, targets) [n, 12] from <bos> digits > reversed-digits <eos>; only the answer
    and <eos> are scored. Every example has the same length, so nothing is padded."""
    encoded = encode_examples(tok, examples)
    rows = np.array(encoded.ids)                      # [n, 13]
    targets = rows[:, 1:].copy()                      # position j predicts token j + 1
    targets[:, :encoded.starts[0] - 1] = IGNORE_INDEX
    return rows[:, :-1], targets


def warmup_cosine(step, steps, warmup, peak):
    """Linear warmup to ``peak``, then a cosine down to peak / 10."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / (steps - warmup))))


def answer_before_eos(tok, ids):
    """The text generated before the first <eos> (None if no <eos> came: a wrong answer)."""
    ids = list(ids)
    return tok.decode(ids[:ids.index(tok.eos_id)]) if tok.eos_id in ids else None


@pytest.mark.slow
def test_trains_the_reverse_task_to_99_percent_heldout():
    split = reverse_task(n_train=3000, n_heldout=500, length=5)
    tok = CharTokenizer.from_corpus("0123456789>")
    inputs, targets = reverse_rows(tok, split.train)
    rng = np.random.default_rng(0)
    params = gpt.init_params(tok.vocab_size, inputs.shape[1], 64, 2, rng)
    state = {}
    with limit_blas_threads(1):                       # small matrices: one thread is fastest
        for step in range(400):
            rows = rng.integers(0, len(inputs), 32)
            _, _, cache = gpt.forward(params, inputs[rows], targets[rows], n_heads=N_HEADS)
            gpt.adamw_step(params, gpt.backward(params, cache), state,
                           lr=warmup_cosine(step, 400, 20, 3e-3), betas=(0.9, 0.98))
        prompts = np.array([tok.encode(e.prompt, bos=True) for e in split.heldout])
        new = gpt.generate(params, prompts, 6, n_heads=N_HEADS)
    answers = [answer_before_eos(tok, row) for row in new]
    # scored by reversing the prompt's digits, not by the split's stored answers
    correct = sum(a == e.prompt[:-1][::-1] for a, e in zip(answers, split.heldout))
    assert correct / len(split.heldout) >= 0.99


def test_float32_stays_float32(rng):
    params = gpt.init_params(13, 8, 16, 2, rng)
    ids, targets = rng.integers(0, 13, (2, 8)), rng.integers(0, 13, (2, 8))
    logits, loss, cache = gpt.forward(params, ids, targets, n_heads=4)
    grads = gpt.backward(params, cache)
    gpt.adamw_step(params, grads, {}, lr=1e-3)
    assert logits.dtype == loss.dtype == np.float32
    assert all(g.dtype == np.float32 for g in grads.values())
    assert all(w.dtype == np.float32 for w in params.values())


def test_the_file_fits_one_screen_and_imports_only_numpy():
    text = GPT_FILE.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    imported = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import (from npformer)"
            imported.add(node.module.split(".")[0])
    assert imported <= {"numpy", "math"}, imported
