"""The training loop: batches -> loss -> hand-written backward -> optimizer step.

One step:
    batch (padded, targets = inputs shifted by one, IGNORE_INDEX where not counted)
    -> for each micro-batch: forward, cross-entropy, backward (gradients add up)
    -> clip the global gradient norm -> NaN/Inf guard -> AdamW step at the
       warmup + cosine learning rate.

Determinism: the batch of step s is drawn from ``default_rng([seed, s])``, so
it depends only on (seed, s), never on what ran before. With the weights and
the optimizer state restored, a resumed run therefore repeats the loss curve
of an uninterrupted one bit for bit.

Gradient accumulation: the batch is split into ``micro_batches`` pieces; each
piece's mean-loss gradient is weighted by its share of the counted tokens, so
the summed gradient equals the gradient of the whole batch's mean loss.

Stopping: Ctrl-C (SIGINT), SIGTERM and SIGHUP finish the current step, save a
checkpoint and return; a second signal stops at once (unless a save is under
way, which always completes).

The loop, ``train``, is at the end of the file; the small helpers it calls
(resume, checkpointing) come first; the settings of a run and its history are in
``settings.py``, the stop signals in ``runtime/signals.py``, the progress bar in
``progress.py``.
"""
from __future__ import annotations

import dataclasses
import math
import time
import warnings
from typing import NamedTuple

import numpy as np

from ..checkpoints.budget import check_disk, checkpoint_bytes
from ..checkpoints.checkpoint import (CheckpointError, CheckpointSaveError, checkpoint_exists,
                                read_checkpoint, save_checkpoint)
from ..checkpoints.lock import writer_lock
from ..t10_model import DecoderLM
from ..t11_loss import IGNORE_INDEX, cross_entropy, cross_entropy_forward
from ..t19_optim import AdamW, clip_grad_norm
from .progress import Progress
from .settings import LONG_RUN, History, TrainConfig, default_checkpoint_every  # noqa: F401 (importable here too)
from ..runtime.signals import StopSignals


class TrainingDiverged(RuntimeError):
    """The loss or the gradient became NaN or infinite; the weights were not updated."""


def make_optimizer(model, config):
    """The AdamW the config asks for (lr, betas, weight decay), over the model's named parameters."""
    return AdamW(model.named_parameters(), lr=config.lr, betas=config.betas,
                 weight_decay=config.weight_decay)


# -- resume and checkpoints ----------------------------------------------------------------
FREE_ON_RESUME = ("steps", "decay_steps", "eval_every", "checkpoint_every")   # checked apart, or harmless
def resume_from(out_dir, model, optimizer, config):
    """Load weights and optimizer from the checkpoint in ``out_dir``; returns (history, step).

    ``config`` must equal the saved settings in everything that changes the numbers:
    ``eval_every`` and ``checkpoint_every`` may differ, and ``steps`` may when the
    learning-rate schedule stays the same (``saved.extended(steps)``) and is not below
    the step reached.
    """
    if out_dir is None:
        raise ValueError("resume: needs out_dir, the checkpoint directory to continue from")
    checkpoint = read_checkpoint(out_dir)
    state = checkpoint.state
    try:
        saved = TrainConfig(**state["train_config"])
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{checkpoint.path('state.json')}: no valid training settings "
                              f"({error})") from None
    step = int(state["step"])
    changed = [f.name for f in dataclasses.fields(config)
               if f.name not in FREE_ON_RESUME and getattr(saved, f.name) != getattr(config, f.name)]
    if saved.schedule_steps != config.schedule_steps:
        changed.append("steps (it changes the learning-rate schedule; use the saved settings' "
                       "extended(steps))")
    if changed:
        raise ValueError(f"resume: the training settings differ from the checkpoint's: {changed}")
    if config.steps < step:
        raise ValueError(f"resume: steps={config.steps} is below the {step} steps already done")
    checkpoint.load_weights(model)
    checkpoint.load_optimizer(optimizer)
    return History.from_dict(state["history"]), step


def check_disk_for(out_dir, model, config):
    """``CheckpointSaveError`` when ``out_dir``'s disk cannot take two checkpoints of this run
    (a save writes the new one before removing the old); returns what one checkpoint takes."""
    need = checkpoint_bytes(model.num_parameters(), model.dtype.itemsize, config.steps)
    check_disk(out_dir, need, CheckpointSaveError)
    return need


class Checkpointer:
    """Saves the run to ``out_dir`` (nothing when it is None) and remembers the last step saved."""

    def __init__(self, out_dir, model, tokenizer, optimizer, config, history, extra_state):
        self.out_dir, self.model, self.tokenizer, self.optimizer = out_dir, model, tokenizer, optimizer
        self.config, self.history, self.extra_state = config, history, extra_state or {}
        self.last_step = None
        if out_dir is not None and checkpoint_exists(out_dir):
            try:
                self.last_step = read_checkpoint(out_dir, weights=False).state.get("step")
            except CheckpointError:
                self.last_step = None

    def save(self, step):
        """Write the checkpoint of ``step`` (one unit: the previous one stays until it is whole)."""
        if self.out_dir is None:
            return
        state = {**self.extra_state, "step": step, "train_config": self.config.to_dict(),
                 "history": self.history.to_dict()}
        save_checkpoint(self.out_dir, self.model, self.tokenizer, self.optimizer, state)
        self.last_step = step

    def describe_last(self):
        """Where the last good checkpoint is, in words."""
        if self.out_dir is None:
            return "nothing was saved"
        if self.last_step is None:
            return f"no checkpoint was saved in {self.out_dir}"
        return f"the last good checkpoint in {self.out_dir} (step {self.last_step}) is untouched"


class TrainResult(NamedTuple):
    """What ``train`` returns: the history, the steps completed, and why it stopped early."""

    history: History
    step: int                       # steps completed
    interrupted: bool               # stopped by a signal (a checkpoint was saved if out_dir was given)
    signal: int | None = None       # the signal that stopped it (signal.SIGINT, SIGTERM or SIGHUP)


def train_step(model, batch, micro_batches=1):
    """Forward and backward of one batch (gradients ADDED into .grad); returns the mean loss.

    Each micro-batch's gradient is weighted by (its counted targets / all counted
    targets): the sum is the gradient of the full batch's mean loss.
    """
    total = max(batch.counted, 1)
    loss_sum = 0.0
    for rows in np.array_split(np.arange(len(batch.inputs)), micro_batches):
        mask = batch.key_mask[rows]
        n = int(mask.any(axis=0).nonzero()[0].max()) + 1 if mask.any() else 1   # trim padding
        targets = batch.targets[rows, :n]
        count = int((targets != IGNORE_INDEX).sum())
        if count == 0:
            continue
        logits, cache = model.forward(batch.inputs[rows, :n], key_mask=mask[:, :n])
        loss, d_logits = cross_entropy(logits, targets)
        share = d_logits.dtype.type(count / total)          # this piece's share of the batch loss
        model.backward(d_logits * share, cache)
        loss_sum += float(loss) * count
    return loss_sum / total


def optimizer_step(model, optimizer, batch, config, step):
    """One step at learning rate ``config.lr_at(step)``: zero, forward + backward, clip, update.

    Returns (loss, gradient norm before clipping). Raises ``TrainingDiverged``, the
    weights untouched, when the loss or the gradient is not finite.
    """
    optimizer.lr = config.lr_at(step)
    model.zero_grad()
    loss = train_step(model, batch, config.micro_batches)
    if config.clip:
        norm = clip_grad_norm(optimizer.params, config.clip)
    else:
        norm = math.sqrt(sum(float(np.vdot(p.grad, p.grad)) for p in optimizer.params))
    if not (math.isfinite(loss) and math.isfinite(norm)):
        raise TrainingDiverged(f"step {step + 1}: loss {loss}, gradient norm {norm}: training "
                               f"diverged and stopped before updating the weights")
    optimizer.step()
    return loss, norm


def evaluate_loss(model, batches):
    """Mean cross-entropy over every counted target of ``batches`` (no gradients)."""
    total, count = 0.0, 0
    for batch in batches:
        logits = model.forward(batch.inputs, key_mask=batch.key_mask)[0]
        loss, _ = cross_entropy_forward(logits, batch.targets)
        total += float(loss) * batch.counted
        count += batch.counted
    return total / max(count, 1)


def answer_accuracy(model, tokenizer, examples, batch_size=256, max_new_tokens=None):
    """(exact-match accuracy, predicted answers): greedy, batched, KV-cached generation."""
    from ..t12_generate import generate
    predictions = []
    longest = max(len(tokenizer.encode(e.answer)) for e in examples) + 1
    max_new_tokens = longest if max_new_tokens is None else max_new_tokens
    for i in range(0, len(examples), batch_size):
        chunk = examples[i:i + batch_size]
        prompts = [tokenizer.encode(e.prompt, bos=True) for e in chunk]
        new = generate(model, prompts, max_new_tokens, eos_id=tokenizer.eos_id, pad_id=tokenizer.pad_id)
        predictions += [tokenizer.decode(ids) for ids in new]
    correct = sum(p == e.answer for p, e in zip(predictions, examples))
    return correct / len(examples), predictions


def train(model, source, config, tokenizer=None, out_dir=None, resume=False, evaluate=None,
          progress=True, on_step=None, extra_state=None, log=print):
    """Train ``model`` on batches from ``source`` (``ExampleSource`` or ``TextSource``).

    ``out_dir``: checkpoints go there (every ``config.save_every`` steps, at the end,
    and when stopped by a signal); the free space for them is checked first. ``resume``: continue from the checkpoint in ``out_dir``.
    ``evaluate(model) -> dict`` runs every ``eval_every`` steps and at the end; ``log``
    prints its results. ``on_step(step, loss)`` is called after each step.
    ``extra_state``: a JSON-able dict saved in every checkpoint's state.json.
    Raises ``TrainingDiverged`` on a NaN/Inf loss or gradient, leaving the last
    checkpoint as it was. While it runs it holds ``out_dir``'s writer lock
    (``files.lock``): a second run into the same directory gets ``CheckpointBusy``.
    """
    if not isinstance(model, DecoderLM):
        raise TypeError(f"model: train() trains a DecoderLM (ids in, next-token logits out), "
                        f"got {type(model).__name__}")
    if out_dir is None:
        return _train(model, source, config, tokenizer, out_dir, resume, evaluate, progress,
                      on_step, extra_state, log)
    with writer_lock(out_dir, on_stale=log):        # one writer per checkpoint directory
        return _train(model, source, config, tokenizer, out_dir, resume, evaluate, progress,
                      on_step, extra_state, log)


def _train(model, source, config, tokenizer, out_dir, resume, evaluate, progress, on_step,
           extra_state, log):
    if out_dir is not None:
        check_disk_for(out_dir, model, config)
    optimizer = make_optimizer(model, config)
    history, step = resume_from(out_dir, model, optimizer, config) if resume else (History(), 0)
    saver = Checkpointer(out_dir, model, tokenizer, optimizer, config, history, extra_state)
    evaluator = _Evaluator(evaluate, model, history, log)
    began, tokens = time.perf_counter(), 0
    heard = {}          # the steps' numerical warnings, each once: told at the end, or in the error
    with Progress(config.steps, step, progress) as bar, StopSignals() as stop:
        evaluator.bar = bar
        while step < config.steps and not stop.requested:
            batch = source.sample(np.random.default_rng([config.seed, step]), config.batch_size)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    loss, norm = optimizer_step(model, optimizer, batch, config, step)
                except TrainingDiverged as error:
                    heard.update(_distinct(caught))
                    raise TrainingDiverged(f"{error}{_numpy_said(heard)}; {saver.describe_last()}; "
                                           f"try a lower learning rate (lr={config.lr:g})") from None
            heard.update(_distinct(caught))
            step += 1
            tokens += int(batch.key_mask.sum())
            history.record(loss, optimizer.lr, norm)
            bar.advance(loss, tokens / max(time.perf_counter() - began, 1e-9))
            if on_step is not None:
                on_step(step, loss)
            if config.eval_every and step % config.eval_every == 0 and step < config.steps:
                evaluator.run(step)
            if config.save_every and step % config.save_every == 0:
                with stop.deferred():
                    saver.save(step)
        _warn_again(heard)
        history.seconds += time.perf_counter() - began
        history.tokens += tokens
        finished = step >= config.steps
        if finished and (not history.evals or history.evals[-1]["step"] != step):
            evaluator.run(step, show=False)         # the caller reports the final numbers
        with stop.deferred():
            saver.save(step)
    return TrainResult(history, step, not finished, stop.signal if not finished else None)


def _distinct(caught):
    """Warnings caught during a step, each (text, kind, place) once."""
    return {(str(w.message), w.category, w.filename, w.lineno): w for w in caught}


def _numpy_said(heard):
    """The numerical warnings of a diverged run, as part of its message: a run that
    overflows says so once, in the error, instead of printing each warning before it."""
    said = list(dict.fromkeys(text for text, category, _, _ in heard if issubclass(category, RuntimeWarning)))
    return f" (numpy warned on the way: {', '.join(said)})" if said else ""


def _warn_again(heard):
    """The warnings of a run that did not diverge, passed on (once each) as if never caught."""
    for w in heard.values():
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


class _Evaluator:
    """Runs ``evaluate(model)``, keeps the result in the history and prints it."""

    def __init__(self, evaluate, model, history, log):
        self.evaluate, self.model, self.history, self.log = evaluate, model, history, log
        self.bar = None

    def run(self, step, show=True):
        if self.evaluate is None:
            return
        self.history.evals.append({"step": step, **self.evaluate(self.model)})
        if not show:
            return
        text = f"step {step}: " + ", ".join(
            f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
            for k, v in self.history.evals[-1].items() if k != "step")
        if self.bar is not None and self.bar.active:
            self.bar.write(text)
        elif self.log is not None:
            self.log(text)
