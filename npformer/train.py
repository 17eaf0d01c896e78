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
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from threadpoolctl import threadpool_limits

from .checkpoint import load_optimizer, load_state, load_weights, save_checkpoint
from .loss import IGNORE_INDEX, cross_entropy, cross_entropy_forward
from .optim import AdamW, clip_grad_norm, warmup_cosine


@contextlib.contextmanager
def limit_blas_threads(n):
    """Limit BLAS to ``n`` threads (0: leave as configured).

    These matrices are small: on 2 cores one thread is about as fast as two on
    a quiet machine, and several times faster when other processes compete.
    """
    if not n:
        yield
        return
    with threadpool_limits(limits=n, user_api="blas"):
        yield


class Batch(NamedTuple):
    """inputs [B, N] ids, targets [B, N] ids or IGNORE_INDEX, key_mask [B, N] (True = real)."""

    inputs: np.ndarray
    targets: np.ndarray
    key_mask: np.ndarray

    @property
    def counted(self):
        return int((self.targets != IGNORE_INDEX).sum())


def pad_batch(sequences, starts, pad_id):
    """Right-pad id sequences into a ``Batch`` for next-token prediction.

    inputs = seq[:-1], targets = seq[1:]; a target counts only from index
    ``start`` of its sequence on (the answer), padding never counts.
    """
    lengths = np.array([len(s) for s in sequences])
    N = int(lengths.max()) - 1
    B = len(sequences)
    ids = np.full((B, N + 1), pad_id, dtype=np.int64)
    for row, seq in enumerate(sequences):
        ids[row, :len(seq)] = seq
    columns = np.arange(N)[None, :]                                    # target j = ids[j + 1]
    counted = (columns + 1 >= np.asarray(starts)[:, None]) & (columns + 1 < lengths[:, None])
    targets = np.where(counted, ids[:, 1:], IGNORE_INDEX)
    return Batch(ids[:, :-1], targets, columns < (lengths - 1)[:, None])


class ExampleSource:
    """Draws batches of encoded examples (``data.encode_examples``), loss on the answers."""

    def __init__(self, encoded, pad_id):
        if not encoded.ids:
            raise ValueError("encoded: expected at least one example")
        self.ids, self.starts, self.pad_id = encoded.ids, encoded.starts, pad_id

    @property
    def max_len(self):
        return max(len(s) for s in self.ids) - 1

    def sample(self, rng, batch_size):
        """A Batch of ``batch_size`` examples drawn with ``rng``."""
        rows = rng.integers(0, len(self.ids), batch_size)
        return pad_batch([self.ids[r] for r in rows], [self.starts[r] for r in rows], self.pad_id)

    def batches(self, batch_size):
        """Every example once, in order (for evaluation)."""
        for i in range(0, len(self.ids), batch_size):
            yield pad_batch(self.ids[i:i + batch_size], self.starts[i:i + batch_size], self.pad_id)


class TextSource:
    """Random windows of ``seq_len + 1`` ids from one long encoded text; every target counts."""

    def __init__(self, ids, seq_len):
        self.ids = np.asarray(ids, dtype=np.int64)
        if len(self.ids) < 2:
            raise ValueError(f"ids: expected a text of at least 2 tokens, got {len(self.ids)}")
        self.seq_len = min(seq_len, len(self.ids) - 1)

    @property
    def max_len(self):
        return self.seq_len

    def sample(self, rng, batch_size):
        """A Batch of ``batch_size`` random windows drawn with ``rng``."""
        first = rng.integers(0, len(self.ids) - self.seq_len, batch_size)
        windows = self.ids[first[:, None] + np.arange(self.seq_len + 1)]     # [B, N + 1]
        return Batch(windows[:, :-1], windows[:, 1:], np.ones((batch_size, self.seq_len), bool))


@dataclass
class TrainConfig:
    """Settings of a run; saved with each checkpoint (a resume must use the same)."""

    steps: int = 1000
    batch_size: int = 32
    micro_batches: int = 1
    lr: float = 3e-3
    min_lr: float | None = None        # None: lr / 10
    warmup: int | None = None          # None: 5% of the steps
    weight_decay: float = 0.01
    betas: tuple = (0.9, 0.98)
    clip: float | None = 1.0
    eval_every: int = 0                # 0: evaluate only at the end
    checkpoint_every: int = 0          # 0: save only at the end (and on Ctrl-C)
    seed: int = 0

    def __post_init__(self):
        self.betas = tuple(self.betas)
        for name in ("steps", "batch_size", "micro_batches"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name}: expected a positive integer, got {value!r}")
        if self.batch_size % self.micro_batches:
            raise ValueError(f"micro_batches: must divide batch_size={self.batch_size}, "
                             f"got {self.micro_batches}")
        if not self.lr > 0:
            raise ValueError(f"lr: expected a positive number, got {self.lr!r}")

    def lr_at(self, step):
        """The learning rate of optimizer step ``step`` (warmup, then cosine)."""
        warmup = max(1, self.steps // 20) if self.warmup is None else self.warmup
        min_lr = self.lr / 10 if self.min_lr is None else self.min_lr
        return warmup_cosine(step, self.steps, warmup, self.lr, min_lr)

    def to_dict(self):
        """The settings as a JSON-ready dict."""
        data = dataclasses.asdict(self)
        data["betas"] = list(self.betas)
        return data


@dataclass
class History:
    """Per step: loss, learning rate, gradient norm; plus evaluations ``{"step": s, ...}``."""

    loss: list = dataclasses.field(default_factory=list)
    lr: list = dataclasses.field(default_factory=list)
    grad_norm: list = dataclasses.field(default_factory=list)
    evals: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    tokens: int = 0

    def to_dict(self):
        """The loss history as a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data):
        return cls(**data)


class TrainingDiverged(RuntimeError):
    """The loss or the gradient became NaN or infinite; the weights were not updated."""


class TrainResult(NamedTuple):
    history: History
    step: int               # steps completed
    interrupted: bool       # stopped by Ctrl-C (a checkpoint was saved if out_dir was given)


def make_optimizer(model, config):
    """The AdamW (or SGD) the config asks for, over the model's named parameters."""
    return AdamW(model.named_parameters(), lr=config.lr, betas=config.betas,
                 weight_decay=config.weight_decay)


def train_step(model, batch, micro_batches=1):
    """Forward and backward of one batch (gradients ADDED into .grad); returns the mean loss.

    Each micro-batch's gradient is weighted by (its counted targets / all counted
    targets): the sum is the gradient of the full batch's mean loss.
    """
    total = max(batch.counted, 1)
    rows = np.array_split(np.arange(len(batch.inputs)), micro_batches)
    loss_sum = 0.0
    for part in rows:
        mask = batch.key_mask[part]
        n = int(mask.any(axis=0).nonzero()[0].max()) + 1 if mask.any() else 1   # trim padding
        targets = batch.targets[part, :n]
        count = int((targets != IGNORE_INDEX).sum())
        if count == 0:
            continue
        logits, cache = model.forward(batch.inputs[part, :n], key_mask=mask[:, :n])
        loss, d_logits = cross_entropy(logits, targets)
        d_logits *= d_logits.dtype.type(count / total)
        model.backward(d_logits, cache)
        loss_sum += float(loss) * count
    return loss_sum / total


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
    from .generate import generate
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


class _StopFlag:
    """Turns the first Ctrl-C into a request to stop after the current step."""

    def __init__(self):
        self.requested = False
        self.previous = None

    def __enter__(self):
        try:
            self.previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:                  # not the main thread: leave Ctrl-C alone
            self.previous = None
        return self

    def _handle(self, signum, frame):
        if self.requested:                  # a second Ctrl-C: stop right now
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
        return False


def _progress(total, initial, enabled):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, desc="training", unit="step", mininterval=0.25,
                dynamic_ncols=True, leave=True)


def train(model, source, config, tokenizer=None, out_dir=None, resume=False, evaluate=None,
          progress=True, on_step=None, extra_state=None):
    """Train ``model`` on batches from ``source`` (``ExampleSource`` or ``TextSource``).

    ``out_dir``: checkpoints go there (every ``checkpoint_every`` steps, at the end,
    and on Ctrl-C). ``resume``: continue from the checkpoint in ``out_dir``.
    ``evaluate(model) -> dict`` runs every ``eval_every`` steps and at the end.
    ``on_step(step, loss)`` is called after each step (for tests and plots).
    ``extra_state``: a JSON-able dict saved in every checkpoint's state.json.
    Raises ``TrainingDiverged`` on a NaN/Inf loss or gradient, leaving the last
    checkpoint as it was.
    """
    optimizer = make_optimizer(model, config)
    history, start = History(), 0
    if resume:
        if out_dir is None:
            raise ValueError("resume: needs out_dir, the checkpoint directory to continue from")
        state = load_state(out_dir)
        saved = TrainConfig(**state["train_config"])
        if saved != config:
            changed = [f.name for f in dataclasses.fields(config)
                       if getattr(saved, f.name) != getattr(config, f.name)]
            raise ValueError(f"resume: the training settings differ from the checkpoint's: {changed}")
        load_weights(out_dir, model)
        load_optimizer(out_dir, optimizer, state)
        history, start = History.from_dict(state["history"]), int(state["step"])

    def save(step):
        if out_dir is not None:
            save_checkpoint(out_dir, model, tokenizer, optimizer,
                            {**(extra_state or {}), "step": step,
                             "train_config": config.to_dict(), "history": history.to_dict()})

    def run_eval(step):
        if evaluate is not None:
            history.evals.append({"step": step, **evaluate(model)})
            if bar is not None:
                bar.write(f"step {step}: " + ", ".join(
                    f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                    for k, v in history.evals[-1].items() if k != "step"))

    bar = _progress(config.steps, start, progress)
    step, interrupted = start, False
    began, tokens = time.perf_counter(), 0
    try:
        with _StopFlag() as stop:
            while step < config.steps:
                batch = source.sample(np.random.default_rng([config.seed, step]), config.batch_size)
                optimizer.lr = config.lr_at(step)
                model.zero_grad()
                loss = train_step(model, batch, config.micro_batches)
                norm = (clip_grad_norm(optimizer.params, config.clip) if config.clip
                        else math.sqrt(sum(float(np.vdot(p.grad, p.grad)) for p in optimizer.params)))
                if not (math.isfinite(loss) and math.isfinite(norm)):
                    kept = (f"the last good checkpoint in {out_dir} (step {_saved_step(out_dir)}) "
                            f"is untouched" if out_dir is not None else "nothing was saved")
                    raise TrainingDiverged(
                        f"step {step + 1}: loss {loss}, gradient norm {norm}: training diverged and "
                        f"stopped before updating the weights; {kept}; try a lower learning rate")
                optimizer.step()
                step += 1
                tokens += int(batch.key_mask.sum())
                history.loss.append(loss)
                history.lr.append(optimizer.lr)
                history.grad_norm.append(norm)
                if bar is not None:
                    rate = tokens / max(time.perf_counter() - began, 1e-9)
                    bar.set_postfix_str(f"loss {loss:.4g}, {rate:,.0f} tok/s", refresh=False)
                    bar.update(1)
                if on_step is not None:
                    on_step(step, loss)
                if config.eval_every and step % config.eval_every == 0 and step < config.steps:
                    run_eval(step)
                if config.checkpoint_every and step % config.checkpoint_every == 0:
                    save(step)
                if stop.requested:
                    interrupted = True
                    break
            history.seconds += time.perf_counter() - began
            history.tokens += tokens
            if not interrupted and (not history.evals or history.evals[-1]["step"] != step):
                run_eval(step)
            save(step)                      # still inside: a Ctrl-C here cannot cut the save
    finally:
        if bar is not None:
            bar.close()
    return TrainResult(history, step, interrupted)


def _saved_step(out_dir):
    try:
        return load_state(out_dir)["step"]
    except (ValueError, KeyError):
        return "none"


def checkpoint_exists(out_dir):
    """True if ``out_dir`` holds a training checkpoint (its state.json)."""
    return os.path.exists(os.path.join(out_dir, "state.json"))
