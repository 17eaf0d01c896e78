"""``npformer demo``: train a small GPT-2-style decoder on the built-in after-sales
questions (Chinese, or English with ``--lang en``), answer held-out ones, show one
question getting different answers in different contexts, and show where the
answer position looks.

The decoder reads positions with RoPE, not GPT-2's learned table. An answer starts
wherever its question ends, so with a learned table the model must learn each answer at
each start position separately, and a held-out question puts a known answer at a start
it has rarely seen there. English spells every word letter by letter, which spreads the
starts about twice as wide as Chinese: with learned positions the English demo got 1 to
9 of its 152 held-out answers wrong (seeds 0 to 5), often by beginning an answer a few
letters in ("fuse parcel" for "refuse parcel"). RoPE's scores depend only on the offset
between two positions, which is the same wherever the answer starts."""
from __future__ import annotations

import shlex
import signal
import time

import numpy as np

from ..checkpoints.checkpoint import checkpoint_exists
from ..training.data import CONTRASTS, TEMPLATES
from ..t12_generate import generate_text
from ..t10_model import DecoderConfig, DecoderLM
from ..training.loop import TrainConfig, answer_accuracy, train
from .common import UsageError, computing, check_output_dir, check_plot_dir, say
from .datasets import prepare
from .model_options import add_run_arguments
from .pictures import show_in_terminal, write_plots

STEPS = 800
DATA = {"zh": "aftersales", "en": "aftersales-en"}


def add_arguments(parser):
    """Options of ``npformer demo``."""
    parser.add_argument("--lang", choices=tuple(DATA), default="zh",
                        help="the questions' language: zh (Chinese, the tutorial's; default) or en")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="also save the trained model there (for npformer generate)")
    parser.add_argument("--force", action="store_true",
                        help="let --out replace a checkpoint that is already there")
    add_run_arguments(parser, STEPS, 3e-3, 32, resumable=False)


def run(args):
    """Train, answer, contrast contexts, show attention; 0, or 128 + the signal that stopped it."""
    check_output_dir("--out", args.out)
    if args.out is not None and checkpoint_exists(args.out) and not args.force:
        raise UsageError(f"--out: {args.out} already holds a checkpoint; choose another "
                         f"directory or add --force to replace it")
    check_plot_dir(args.plot, "demo")
    with computing("demo", args):
        return _demo(args)


def _demo(args):
    """The demo itself, on the track and cores ``computing`` chose."""
    began = time.perf_counter()
    data = prepare({"data": DATA[args.lang]})
    model = _describe(data, args.seed)
    settings = TrainConfig(steps=args.steps, batch_size=args.batch_size, lr=args.lr, seed=args.seed)
    result = train(model, data.source, settings, data.tokenizer, out_dir=args.out,
                   progress=not args.no_progress, log=say,
                   extra_state={"data_spec": {"data": DATA[args.lang]}})
    if result.interrupted:
        name = signal.Signals(result.signal).name if result.signal else "a signal"
        say(f"stopped by {name} at step {result.step}" +
            (f"; checkpoint saved to {args.out}" if args.out else ""))
        return 128 + (result.signal or signal.SIGINT)
    history = result.history
    say(f"trained {result.step} steps in {time.perf_counter() - began:.1f} s: loss "
        f"{np.mean(history.loss[:10]):.3g} (mean of the first 10 steps) -> "
        f"{np.mean(history.loss[-10:]):.3g} (last 10), "
        f"{history.tokens / max(history.seconds, 1e-9):,.0f} tokens/s")
    accuracy = _answer_heldout(model, data)
    prompts = _contrast_contexts(model, data.tokenizer, args.lang)
    pictures = _show_attention(model, data.tokenizer, prompts[:2])
    if args.plot:
        say("")
        write_plots(args.plot, history, pictures)
    if args.out:
        say(f"model saved to {args.out} (try: npformer generate {shlex.quote(args.out)} --prompt "
            f"{shlex.quote(data.example)})")
    say("")
    say(f"done in {time.perf_counter() - began:.1f} s (held-out accuracy {accuracy:.1%})")
    return 0


def _describe(data, seed):
    """Build the model and say what the data and the model are."""
    tokenizer = data.tokenizer
    config = DecoderConfig.gpt2(vocab_size=tokenizer.vocab_size, d_model=64, n_heads=4, n_layers=2,
                                max_len=data.source.max_len, positions="rope")
    model = DecoderLM(config, np.random.default_rng(seed))
    say(f"built-in after-sales data: {len(data.source.ids)} training questions from "
        f"{len(TEMPLATES)} templates; {len(data.heldout)} held-out questions whose (item, context) "
        f"combination never occurs in training")
    say(f"char tokenizer: {tokenizer.vocab_size} ids ({len(tokenizer.chars)} characters + "
        f"<pad> <bos> <eos> <unk>)")
    say(f"model: GPT-2-style decoder with rotary positions (RoPE), d={config.d_model}, "
        f"{config.n_heads} heads, {config.n_layers} layers, {model.num_parameters():,} parameters, float32, "
        f"every gradient from the hand-written backward")
    return model


def _answer_heldout(model, data):
    """Answer every held-out question; print the score and a few answers (every mistake first)."""
    heldout = data.heldout
    accuracy, predictions = answer_accuracy(model, data.tokenizer, heldout)
    correct = sum(p == e.answer for p, e in zip(predictions, heldout))
    say("")
    say(f"held-out questions (never seen in training): {correct}/{len(heldout)} exact answers = "
        f"{accuracy:.1%}")
    shown, seen_tasks = [], set()
    for e, p in zip(heldout, predictions):
        if e.task not in seen_tasks or p != e.answer:
            seen_tasks.add(e.task)
            shown.append((e, p))
    for e, p in shown[:8]:
        say(f"  {e.prompt} -> {p}  " + ("ok" if p == e.answer else f"WRONG (expected {e.answer})"))
    return accuracy


def _contrast_contexts(model, tokenizer, lang):
    """The same questions in different contexts, answered; returns the prompts."""
    say("")
    say("the same question, different context, different answer:")
    prompts = [template.format(value) for template, values in CONTRASTS[lang] for value in values]
    for prompt, answer in zip(prompts, generate_text(model, tokenizer, prompts, max_new_tokens=16)):
        say(f"  {prompt} -> {answer}")
    return prompts


def _show_attention(model, tokenizer, prompts):
    """Terminal maps of where the answer position looks; returns the pictures for --plot."""
    say("")
    say("where the answer position looks (attention of the last question character, which "
        "predicts the answer; mean over heads; darker = more, # the most; ^ = <bos>):")
    pictures = []
    for prompt in prompts:
        chars, maps = show_in_terminal(model, tokenizer, prompt)
        pictures.append((chars, maps, prompt))
    return pictures
