"""Training (``training/optim.py`` and the reverse task), as the engines know it.

One AdamW update as a component, the facts of Adam's first steps and of decoupled decay, an
update without bias correction as a convention, exercise 19 (the update) and exercise 20 (the
learner's own components trained on the reverse task to >= 99% held-out accuracy) with its
claim. Mistakes: ``training.optim.json``.

The last exercise builds a GPT-2-style decoder (tied head, LayerNorm, tanh-GELU, learned
positions; width 32, 4 heads, 2 layers) from the learner's package and trains it by its own
``train`` with its own AdamW, cross-entropy and every backward it wrote; then it reverses
held-out digit strings by greedy decoding. The settings are those of the library's test
``test_reverse_task_reaches_99_percent_heldout``. It runs on the plain track, unlike the
library's training commands: a fast twin of the library's attention would compute its own
softmax and skip the learner's. The claim is made of two halves: ``reverse_predictions`` runs
the learner's code (when graded, in the learner's process), ``judge_reverse`` counts the
reversed strings (when graded, in the judge, which makes the held-out prompts itself).
"""
from __future__ import annotations

import importlib
import time

import numpy as np

from . import claims
from .draw import Example, arrays, normal, sampled, size, st
from .facts import close
from .registry import Spec

spec = Spec("training/optim.py")


@spec.component("adamw", "one AdamW update of one parameter",
                "adamw_update(data, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0) "
                "-> (data, m, v)", ("training.optim.adamw_update", None), "", ("training.optim.adamw_update",))
def adamw_inputs(draw):
    """One parameter's data, grad, moments m and v (v >= 0), the step (1, 2, ...) and the
    settings lr, betas, eps, weight_decay."""
    shape = (draw(size(1, 3)), draw(size(1, 3)))
    data, grad, m = draw(arrays(shape)), draw(arrays(shape)), draw(arrays(shape))
    v = np.abs(draw(arrays(shape)))
    step = draw(st().integers(1, 5))
    options = {"lr": draw(sampled([0.1, 1e-3])), "betas": draw(sampled([(0.9, 0.999), (0.8, 0.95)])),
               "eps": 1e-8, "weight_decay": draw(sampled([0.0, 0.1]))}
    return Example(("data", "grad", "m", "v", "step"), (data, grad, m, v, step), options)


@spec.corners("adamw")
def adamw_corners(rng):
    data, grad, m = normal(rng, 3, 2), normal(rng, 3, 2), normal(rng, 3, 2)
    v = np.abs(normal(rng, 3, 2))
    names, settings = ("data", "grad", "m", "v", "step"), {"lr": 0.1, "betas": (0.9, 0.999), "eps": 1e-8}
    first = (data, 1e-3 * grad, np.zeros_like(m), np.zeros_like(v), 1)        # the first step: v = 0
    return [Example(names, (data, grad, m, v, 3), {**settings, "weight_decay": 0.1}),
            Example(names, first, {**settings, "weight_decay": 0.0})]


def _adamw(subject, data, grad, step=1, lr=0.1, weight_decay=0.0, m=None, v=None):
    m = np.zeros_like(data) if m is None else m
    v = np.zeros_like(data) if v is None else v
    return subject.output((data, grad, m, v, step),
                          {"lr": lr, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": weight_decay})


@spec.prop("adamw", "the first step moves each weight by lr g / (|g| + eps): about lr, against g", drawn=False)
def adamw_first_step_is_about_lr(subject, example):
    g = np.array([0.5, -2.0, 1e-3])
    data, m, v = _adamw(subject, np.ones(3), g)
    close("weights after one step", data, 1 - 0.1 * g / (np.abs(g) + 1e-8), 1e-12)
    close("m after one step", m, 0.1 * g, 1e-12)
    close("v after one step", v, 0.001 * g * g, 1e-12)


@spec.prop("adamw", "decoupled weight decay: with a zero gradient a step multiplies the weights by "
                    "1 - lr * wd", drawn=False)
def adamw_decay_is_decoupled(subject, example):
    data, _, _ = _adamw(subject, np.array([2.0, -4.0]), np.zeros(2), weight_decay=0.5)
    close("weights", data, np.array([2.0, -4.0]) * (1 - 0.1 * 0.5), 1e-12)


@spec.prop("adamw", "bias correction: at step 2 with m = 0.1 g and v = 0.001 g^2 the step is "
                    "lr g / (|g| + eps) again", drawn=False)
def adamw_corrects_the_bias_at_step_two(subject, example):
    g = np.array([0.5, -2.0])
    # the moments one step of g left behind, then g again: m_hat = g, v_hat = g^2
    data, _, _ = _adamw(subject, np.ones(2), g, step=2, m=0.1 * g, v=0.001 * g * g)
    close("weights after the second step", data, 1 - 0.1 * g / (np.abs(g) + 1e-8), 1e-9)


def adamw_uncorrected():
    """AdamW without bias correction: lr m / (sqrt(v) + eps) from the first step."""
    from ..training.optim import adamw_update

    def uncorrected(data, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        # lr m / (sqrt(v) + eps) is the corrected update with lr, eps and the decay rescaled
        b1, b2 = betas
        c1, c2 = 1 - b1 ** step, 1 - b2 ** step
        rate = lr * c1 / np.sqrt(c2)
        return adamw_update(data, grad, m, v, step, rate, betas, eps / np.sqrt(c2),
                            weight_decay * lr / rate)
    return uncorrected, None


spec.convention("adamw", {"bias_correction": False}, adamw_uncorrected)

spec.exercise(19, "optim", "the AdamW update",
              "beyond the tutorial: training (worked example 17, first training steps)",
              backward=("training/optim.py:adamw_update",), components=("adamw",))
spec.exercise(20, "train", "your components learn the reverse task (>= 99%)",
              "beyond the tutorial: training (worked example 17, first training steps)",
              builds_on=("embedding", "linear", "softmax", "attention", "activations", "ffn", "norm", "block",
                         "model", "loss", "optim"))


STEPS, TARGET, MINUTE = 400, 0.99, 60.0


def _split(L):
    return importlib.import_module(f"{L.__name__}.training.data").reverse_task(n_train=3000, n_heldout=500,
                                                                                length=5)


def reverse_predictions(L):
    """{"predictions": the decoded answers to the held-out prompts, "seconds"}: the part of the
    claim that runs the learner's code (in the learner's process when graded)."""
    began = time.perf_counter()
    data = importlib.import_module(f"{L.__name__}.training.data")
    split = _split(L)
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
        _, predictions = L.training.loop.answer_accuracy(model, tokenizer, split.heldout)
    return {"predictions": [str(p) for p in predictions], "seconds": time.perf_counter() - began}


def judge_reverse(computed):
    """The claim's verdict on what ``reverse_predictions`` computed: the held-out prompts are
    made here again (npformer's own, fixed seed) and a string counts when it is the prompt's
    digits reversed. The detail, or ClaimFailed."""
    import npformer
    heldout = _split(npformer).heldout
    predictions, seconds = computed.get("predictions"), computed.get("seconds")
    if not (isinstance(predictions, list) and len(predictions) == len(heldout)
            and all(isinstance(p, str) for p in predictions) and isinstance(seconds, (int, float))):
        raise claims.ClaimFailed(f"the training run did not give one answer per held-out prompt "
                          f"({len(heldout)}) and its time")
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
    """The claim in one process: ``judge_reverse(reverse_predictions(L))``."""
    return judge_reverse(reverse_predictions(L))


# graded, the two halves run apart: the learner's process computes, the judge decides
trains_the_reverse_task.compute, trains_the_reverse_task.judge = reverse_predictions, judge_reverse
