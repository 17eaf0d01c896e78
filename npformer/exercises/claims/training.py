"""The last exercise: the learner's own components learn the reverse task.

A GPT-2-style decoder (tied head, LayerNorm, tanh-GELU, learned positions; width 32,
4 heads, 2 layers) is built from the learner's package and trained by its own
``train`` with its own AdamW, cross-entropy and every backward it wrote; then it
reverses held-out digit strings by greedy decoding. The settings are those of the
library's test ``test_reverse_task_reaches_99_percent_heldout``. It runs on the plain track,
unlike the library's training commands: a fast twin of the library's attention would compute
its own softmax and skip the learner's.
"""
from __future__ import annotations

import importlib
import time

import numpy as np

from .registry import ClaimFailed, claim

STEPS, TARGET, MINUTE = 400, 0.99, 60.0


def train_reverse(L):
    """(held-out accuracy, seconds) of a decoder made of the learner's components."""
    began = time.perf_counter()
    data = importlib.import_module(f"{L.__name__}.training.data")
    split = data.reverse_task(n_train=3000, n_heldout=500, length=5)
    tokenizer = L.training.tokenizer.CharTokenizer.from_corpus("0123456789>")
    source = data.ExampleSource(data.encode_examples(tokenizer, split.train), tokenizer.pad_id)
    config = L.t10_model.DecoderConfig.gpt2(vocab_size=tokenizer.vocab_size, d_model=32, n_heads=4,
                                        n_layers=2, max_len=source.max_len)
    model = L.t10_model.DecoderLM(config, np.random.default_rng(0))
    # the plain track whatever the process chose: a fast twin would skip the learner's code
    with L.core.track.track("plain"), \
            importlib.import_module(f"{L.__name__}.runtime.cores").limit_blas_threads(1):
        L.training.loop.train(model, source, L.training.loop.TrainConfig(steps=STEPS, batch_size=32, lr=3e-3, seed=0),
                      progress=False)
        accuracy, predictions = L.training.loop.answer_accuracy(model, tokenizer, split.heldout)
    # counted here, independently of the model's own scoring: a string reversed
    correct = sum(p == e.prompt[:-1][::-1] for p, e in zip(predictions, split.heldout))
    return correct / len(split.heldout), time.perf_counter() - began


@claim("train", f"your components train the reverse task to >= {TARGET:.0%} held-out accuracy "
                f"in {STEPS} steps")
def _(L, R):
    accuracy, seconds = train_reverse(L)
    if accuracy < TARGET:
        raise ClaimFailed(f"held-out accuracy {accuracy:.1%} after {STEPS} steps ({seconds:.0f} s): "
                          f"grade the exercises it builds on first")
    slow = "; more than a minute: a Python loop over positions or heads?" if seconds > MINUTE else ""
    return f"held-out accuracy {accuracy:.1%}, trained and evaluated in {seconds:.1f} s on CPU{slow}"
