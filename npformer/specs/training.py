"""The training exercise (exercise 20), as the engines know it: the learner's own components
trained on the reverse task to >= 99% held-out accuracy, and its claim.

The last exercise builds a GPT-2-style decoder (tied head, LayerNorm, tanh-GELU, learned
positions; width 32, 4 heads, 2 layers) from the learner's package and trains it by its own
``train`` with its own AdamW, cross-entropy and every backward it wrote; then it reverses
held-out digit strings by greedy decoding. The settings are those of the library's test
``test_reverse_task_reaches_99_percent_heldout``. It runs on the plain track, unlike the
library's training commands: a fast twin of the library's attention would compute its own
softmax and skip the learner's. The claim is made of two halves: ``reverse_training`` runs
the learner's code (when graded, in the learner's process) and returns the trained weights;
``judge_reverse`` loads them into npformer's own decoder of that shape, reverses the held-out
prompts (which it makes itself) with npformer's own code, and counts. What the learner's
process sends is arrays of the shapes npformer's model asks for, nothing it says about them.
"""
from __future__ import annotations

import importlib
import time

import numpy as np

from . import claims
from .registry import Spec

spec = Spec("training/loop.py")

spec.exercise(20, "train", "your components learn the reverse task (>= 99%)",
              "beyond the tutorial: training (worked example 17, first training steps)",
              builds_on=("embedding", "linear", "softmax", "attention", "activations", "ffn", "norm", "block",
                         "model", "loss", "optim"))

STEPS, TARGET, MINUTE = 400, 0.99, 60.0


SPLIT = {"n_train": 3000, "n_heldout": 500, "length": 5}        # the reverse task's examples


def _split(L):
    return importlib.import_module(f"{L.__name__}.training.data").reverse_task(**SPLIT)


def _model(L, tokenizer, max_len):
    """The decoder the task trains, built from package ``L`` (the learner's, or npformer's)."""
    config = L.t10_model.DecoderConfig.gpt2(vocab_size=tokenizer.vocab_size, d_model=32, n_heads=4,
                                            n_layers=2, max_len=max_len)
    return L.t10_model.DecoderLM(config, np.random.default_rng(0))


def _tokens_and_lengths(L):
    data = importlib.import_module(f"{L.__name__}.training.data")
    tokenizer = L.tokenizer.CharTokenizer.from_corpus("0123456789>")
    source = data.ExampleSource(data.encode_examples(tokenizer, _split(L).train), tokenizer.pad_id)
    return data, tokenizer, source


def reverse_training(L):
    """{"parameters": {name: the trained array}, "seconds"}: the part of the claim that runs the
    learner's code (in the learner's process when graded): their components, trained."""
    began = time.perf_counter()
    _, tokenizer, source = _tokens_and_lengths(L)
    model = _model(L, tokenizer, source.max_len)
    # the plain track whatever the process chose: a fast twin would skip the learner's code
    with L.core.track.track("plain"), \
            importlib.import_module(f"{L.__name__}.runtime.cores").limit_blas_threads(1):
        L.training.loop.train(model, source, L.training.loop.TrainConfig(steps=STEPS, batch_size=32, lr=3e-3, seed=0),
                              progress=False)
    return {"parameters": model.state_dict(), "seconds": np.array(time.perf_counter() - began)}


def judge_reverse(computed):
    """The claim's verdict on what ``reverse_training`` computed: its weights go into
    npformer's own decoder (names, shapes, dtypes and finite values checked), which answers
    the held-out prompts made here again (fixed seed); an answer counts when it is the prompt's
    digits reversed. The detail, or ClaimFailed."""
    import npformer
    from ..training.loop import answer_accuracy
    _, tokenizer, source = _tokens_and_lengths(npformer)
    model = _model(npformer, tokenizer, source.max_len)
    weights, seconds = computed.get("parameters"), computed.get("seconds")
    try:
        if not (isinstance(weights, dict) and isinstance(seconds, np.ndarray) and seconds.shape == ()):
            raise ValueError("expected a table of weights and the seconds training took")
        model.load_state_dict(weights)
    except (ValueError, TypeError) as error:         # load_state_dict names what does not fit
        raise claims.ClaimFailed(f"the training run did not give the decoder's weights: {error}") from None
    seconds = float(seconds)
    heldout = _split(npformer).heldout
    _, predictions = answer_accuracy(model, tokenizer, heldout)
    correct = sum(p == e.prompt[:-1][::-1] for p, e in zip(predictions, heldout))
    accuracy = correct / len(heldout)
    if accuracy < TARGET:
        raise claims.ClaimFailed(f"held-out accuracy {accuracy:.1%} after {STEPS} steps ({seconds:.0f} s): "
                          f"grade the exercises it builds on first")
    slow = "; more than a minute: a Python loop over positions or heads?" if seconds > MINUTE else ""
    return f"held-out accuracy {accuracy:.1%}, trained and evaluated in {seconds:.1f} s on CPU{slow}"


@spec.claim("train", f"your components train the reverse task to >= {TARGET:.0%} held-out accuracy "
                f"in {STEPS} steps")
def trains_the_reverse_task(L, R):
    """The claim in one process: ``judge_reverse(reverse_training(L))``."""
    return judge_reverse(reverse_training(L))


# graded, the two halves run apart: the learner's process trains, the judge answers with the
# weights; npformer's own training is not run to compare (the judge's answers decide)
trains_the_reverse_task.compute, trains_the_reverse_task.judge = reverse_training, judge_reverse
trains_the_reverse_task.compared = False
