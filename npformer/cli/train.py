"""``npformer train``: the training loop on built-in data (after-sales in Chinese or
English, reverse, add) or a UTF-8 text file (char-level), with checkpoints, resume,
and a clean stop on Ctrl-C, SIGTERM or SIGHUP."""
from __future__ import annotations

import contextlib
import os
import shlex
import signal

import numpy as np

from ..checkpoints.checkpoint import CheckpointError
from ..checkpoints.budget import check_disk, checkpoint_bytes, decoder_parameters
from ..checkpoints.lock import CheckpointBusy, writer_lock
from ..t10_model import DecoderLM
from ..training.loop import train
from .common import (UsageError, computing, check_output_dir, check_plot_dir, non_negative_int,
                     positive_int, say, warn)
from .datasets import BUILTIN, PROMPT_FORMATS
from .model_options import add_model_arguments, add_run_arguments, check_memory
from .pictures import prompt_attention, write_plots
from .resume import new_run, resumed_run

# A model that has learned a built-in task answers at least this share of its held-out prompts
# exactly. Every --arch with every --positions reached 100% on add and on reverse in 3000 steps
# (seed 0), the ones that stopped short at the default 1000 among them.
REACHED, LONGER = 0.99, 3000


def add_arguments(parser):
    """Options of ``npformer train``; the settings flags default to None so that a resumed
    run can tell which ones the user gave."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--data", choices=BUILTIN, default=None,
                        help="built-in data: aftersales (default; Chinese), aftersales-en "
                             "(English), reverse (digit strings), add (sums)")
    source.add_argument("--text", metavar="FILE", default=None,
                        help="train a char-level model on this UTF-8 text file instead")
    parser.add_argument("--out", metavar="DIR", default="npformer-run",
                        help="checkpoint directory (default ./npformer-run)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run saved in --out with its own settings; "
                             "--steps N (more than before) extends it at the final learning rate")
    parser.add_argument("--force", action="store_true",
                        help="start a new run in --out even if it holds a checkpoint (replaced at "
                             "the first save)")
    parser.add_argument("--seq-len", type=positive_int, default=None,
                        help="window length for --text (default 64)")
    parser.add_argument("--micro-batches", type=positive_int, default=None,
                        help="split each batch into N micro-batches, gradients accumulated (default 1)")
    parser.add_argument("--eval-every", type=non_negative_int, default=None,
                        help="evaluate every N steps (default 0: at the end)")
    parser.add_argument("--checkpoint-every", type=non_negative_int, default=None,
                        help="save every N steps, and at the end and when stopped (default: "
                             "every tenth of the run for 200 steps or more, else only at the end; "
                             "0: only at the end)")
    add_model_arguments(parser)
    add_run_arguments(parser, 1000, 3e-3, 32, resumable=True)


def run(args):
    """Train (or resume); 0 when done, 128 + the signal's number when stopped by one."""
    check_output_dir("--out", args.out)
    check_plot_dir(args.plot, "train")
    created = not os.path.exists(args.out)
    try:
        with writer_lock(args.out, on_stale=lambda text: warn("train", text)):
            with computing("train", args):
                return _train(args)
    except CheckpointBusy as error:
        raise UsageError(f"--out: {error}") from None
    finally:
        if created:                     # refused before anything was saved: leave no trace
            with contextlib.suppress(OSError):
                os.rmdir(args.out)


def _train(args):
    """Training itself, on the track and cores ``computing`` chose."""
    try:
        plan = resumed_run(args) if args.resume else new_run(args)
    except CheckpointError as error:
        raise UsageError(str(error)) from None
    if plan.start >= plan.settings.steps:
        say(f"the run in {args.out} is complete at step {plan.start} of {plan.settings.steps}; "
            f"give --steps N (more) to extend it")
        return 0
    check_memory(plan.config, plan.settings.batch_size, plan.data.source.max_len)
    try:
        check_disk(args.out, checkpoint_bytes(decoder_parameters(plan.config),
                                              np.dtype(plan.dtype).itemsize, plan.settings.steps),
                   UsageError)
    except UsageError as error:
        raise UsageError(f"--out: {error}") from None
    model = DecoderLM(plan.config, np.random.default_rng(plan.settings.seed), plan.dtype)
    _describe(args, plan, model)
    result = train(model, plan.data.source, plan.settings, plan.data.tokenizer,
                   out_dir=args.out, resume=args.resume, evaluate=plan.data.evaluate,
                   progress=not args.no_progress, extra_state={"data_spec": plan.spec}, log=say)
    if result.interrupted:
        name = signal.Signals(result.signal).name if result.signal else "a signal"
        say(f"stopped by {name} at step {result.step} of {plan.settings.steps}: checkpoint saved "
            f"to {args.out}; continue with: npformer train --out {args.out} --resume")
        return 128 + (result.signal or signal.SIGINT)
    history = result.history
    last = history.evals[-1] if history.evals else {}
    say(f"trained {result.step} steps: loss {history.loss[-1]:.4g}" +
        "".join(f", {k} {v:.4g}" for k, v in last.items() if k != "step") +
        f"; checkpoint in {args.out}")
    short = short_of_the_task(plan.spec["data"], last.get("heldout_accuracy"), result.step)
    if short:
        say(short)
    if args.plot:
        chars, _, maps = prompt_attention(model, plan.data.tokenizer, plan.data.probe, plan.data.bos)
        write_plots(args.plot, history, [(chars, maps, plan.data.probe)])
    form = PROMPT_FORMATS.get(plan.spec["data"])
    if form is not None:
        say(f"prompts of {plan.spec['data']}: {form.form}; answers: {form.answer}")
    say(f"try: npformer generate {shlex.quote(args.out)} --prompt {shlex.quote(plan.data.example)}")
    return 0


def short_of_the_task(data, accuracy, steps):
    """A line saying the run did not learn its built-in task, and what to try; None when it
    did (or when its data has no held-out answers to count)."""
    if accuracy is None or accuracy >= REACHED:
        return None
    return (f"the run has not learned {data} yet: {accuracy:.1%} of its held-out prompts answered "
            f"exactly (a model that has learned it answers {REACHED:.0%} or more); try more steps, "
            f"--steps {max(LONGER, 3 * steps)} in a new --out or with --force (every --arch and "
            f"--positions reached 100% on add and reverse in {LONGER} steps)")


def _describe(args, plan, model):
    spec, config = plan.spec, plan.config
    if args.resume:
        say(f"resuming {args.out} at step {plan.start} of {plan.settings.steps}")
    say(f"data: {spec['data']}" + (f" ({spec['path']})" if spec["data"] == "text" else "") +
        f"; vocabulary {plan.data.tokenizer.vocab_size}; model {model.num_parameters():,} "
        f"parameters (d={config.d_model}, {config.n_heads} heads, {config.n_layers} layers)")
