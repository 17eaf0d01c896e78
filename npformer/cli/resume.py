"""What a ``train`` run is set up with: the flags of a new run, or the saved settings of a
resumed one, where only ``--steps`` may grow and any other changed flag is refused by name."""
from __future__ import annotations

import os
from typing import NamedTuple

from ..checkpoints.checkpoint import CheckpointError, checkpoint_exists, read_checkpoint
from ..t10_model import DecoderConfig
from ..training.settings import TrainConfig, default_checkpoint_every
from .common import UsageError
from .datasets import prepare, text_spec
from .model_options import MODEL_DEFAULTS, model_config, saved_model_flags

# The settings a checkpoint fixes: flag -> its default for a new run.
RUN_DEFAULTS = {"data": "aftersales", "text": None, "seq_len": 64, "steps": 1000, "lr": 3e-3,
                "batch_size": 32, "seed": 0, "micro_batches": 1, "eval_every": 0,
                "checkpoint_every": None, **MODEL_DEFAULTS}   # None: default_checkpoint_every(steps)


class Plan(NamedTuple):
    """What to train: the data spec, the prepared data, the model config and the settings."""

    spec: dict
    data: object                  # datasets.Prepared
    config: object                # DecoderConfig
    dtype: object
    settings: TrainConfig
    start: int                    # the step the run starts from


def flag(dest):
    """``batch_size`` -> ``--batch-size``."""
    return "--" + dest.replace("_", "-")


def new_run(args):
    """The plan of a new run (the flags the user left out take their defaults)."""
    if checkpoint_exists(args.out) and not args.force:
        raise UsageError(f"--out: {args.out} already holds a checkpoint; add --resume to continue "
                         f"it, --force to replace it, or choose another directory")
    if args.seq_len is not None and args.text is None:
        raise UsageError("--seq-len: only used with --text (built-in data has its own lengths)")
    for dest, default in RUN_DEFAULTS.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)
    if args.checkpoint_every is None:
        args.checkpoint_every = default_checkpoint_every(args.steps)
    if args.batch_size % args.micro_batches:
        raise UsageError(f"--micro-batches: {args.micro_batches} does not divide --batch-size "
                         f"{args.batch_size}")
    if args.text is not None:
        if not args.text:                       # abspath('') would be the current folder
            raise UsageError("--text: expected a UTF-8 text file, got an empty path ''")
        spec = text_spec(os.path.abspath(args.text), args.seq_len)
    else:
        spec = {"data": args.data}
    data = prepare(spec)
    config = model_config(args, data.tokenizer.vocab_size, data.source.max_len)
    settings = TrainConfig(steps=args.steps, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                           eval_every=args.eval_every, micro_batches=args.micro_batches,
                           checkpoint_every=args.checkpoint_every)
    return Plan(spec, data, config, "float32", settings, 0)


def _saved_flags(checkpoint, settings, spec):
    """The value each settings flag had in the saved run."""
    text = spec.get("data") == "text"
    return {"data": None if text else spec.get("data"), "text": spec.get("path") if text else None,
            "seq_len": spec.get("seq_len"), "lr": settings.lr, "batch_size": settings.batch_size,
            "seed": settings.seed, "micro_batches": settings.micro_batches,
            "eval_every": settings.eval_every, "checkpoint_every": settings.checkpoint_every,
            **saved_model_flags(checkpoint.config)}


def resumed_run(args):
    """The plan of the run saved in ``--out``: its own settings, ``--steps`` extending it."""
    if args.force:
        raise UsageError("--force: cannot be combined with --resume (one continues the "
                         "checkpoint, the other replaces it)")
    if not checkpoint_exists(args.out):
        raise UsageError(f"--resume: {args.out} holds no checkpoint to continue")
    try:
        checkpoint = read_checkpoint(args.out)
        settings = TrainConfig(**checkpoint.state["train_config"])
    except CheckpointError as error:
        raise UsageError(str(error)) from None
    except (KeyError, TypeError, ValueError) as error:
        raise UsageError(f"{checkpoint.path('state.json')}: no valid training settings "
                         f"({error})") from None
    spec = checkpoint.state.get("data_spec")
    if not isinstance(checkpoint.config, DecoderConfig) or not isinstance(spec, dict) or \
            checkpoint.tokenizer is None:
        raise UsageError(f"--resume: the checkpoint in {args.out} was not saved by npformer "
                         f"train or demo (not a decoder, or no data spec or tokenizer)")
    saved = _saved_flags(checkpoint, settings, spec)
    if args.text is not None:
        args.text = os.path.abspath(args.text)
    for dest, value in saved.items():
        given = getattr(args, dest)
        if given is not None and given != value:
            raise UsageError(f"{flag(dest)} {given}: the run in {args.out} was made with "
                             f"{flag(dest)} {value}; a resumed run keeps its settings (only "
                             f"--steps can grow)")
    return Plan(spec, prepare(spec, checkpoint.tokenizer, args.out), checkpoint.config,
                checkpoint.dtype, _extended(args, settings, checkpoint.step), checkpoint.step)


def _extended(args, settings, step):
    if args.steps is None or args.steps == settings.steps:
        return settings
    if args.steps < step:
        raise UsageError(f"--steps {args.steps}: the run in {args.out} is already at step {step}")
    return settings.extended(args.steps)
