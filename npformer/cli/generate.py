"""``npformer generate``: continue prompts from a checkpoint, greedy or sampled.

Greedy by default. ``--temperature T`` samples; ``--top-k``/``--top-p`` alone imply
sampling at temperature 1 (they only mean something when sampling; a note says so), and
with an explicit ``--temperature 0`` they are refused. A built-in task's model stops
at its end token; a prompt not in the task's form gets a note (``PROMPT_FORMATS``). The
model reads at most ``max_len`` positions; a continuation cut there gets a note too.
Notes are one line each on stderr.
"""
from __future__ import annotations

import argparse
import sys
import textwrap

import numpy as np

from ..checkpoints.checkpoint import CheckpointError, load_checkpoint
from ..t10_model import DecoderLM
from ..t12_generate import generate
from .common import UsageError, positive_int, probability, seed, temperature
from .datasets import PROMPT_FORMATS, prompt_note


def _formats_help():
    """The epilog of ``--help``: the prompts each built-in set's model was trained on."""
    width = max(len(name) for name in PROMPT_FORMATS) + 2
    lines = ["prompts: a model trained on built-in data answers only prompts of its set's form"]
    for name, form in PROMPT_FORMATS.items():
        entry = f"{name:{width}}'{form.example}': {form.form}; answers {form.answer}"
        lines.append(textwrap.fill(entry, width=88, initial_indent="  ",
                                   subsequent_indent=" " * (width + 2)))
    lines.append(f"  {'--text':{width}}any text made of the training file's characters")
    return "\n".join(lines)


def add_arguments(parser):
    """Options of ``npformer generate``."""
    parser.epilog = _formats_help()
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("checkpoint", help="checkpoint directory written by npformer train/demo")
    parser.add_argument("--prompt", action="append", required=True,
                        help="text to continue (repeat for a batch)")
    parser.add_argument("--max-new-tokens", type=positive_int, default=32,
                        help="at most this many new tokens (default 32; fewer if the model's "
                             "max_len is reached first)")
    parser.add_argument("--temperature", type=temperature, default=None,
                        help="0: greedy (the default); > 0: sample from softmax(logits / T)")
    parser.add_argument("--top-k", type=positive_int, default=None,
                        help="sample among the k most likely tokens (implies --temperature 1 "
                             "if none is given)")
    parser.add_argument("--top-p", type=probability, default=None,
                        help="sample among the most likely tokens reaching probability p "
                             "(implies --temperature 1 if none is given)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the sampling, >= 0 (default 0)")
    parser.add_argument("--no-cache", action="store_true", help="recompute everything each step")


def note(text):
    """One line on stderr that is not an error."""
    print(f"npformer generate: note: {text}", file=sys.stderr)


def sampling_temperature(args):
    """The temperature to use: the one given, else 1 with --top-k/--top-p, else 0 (greedy)."""
    shaping = args.top_k is not None or args.top_p is not None
    if args.temperature is None:
        return 1.0 if shaping else 0.0
    if args.temperature == 0 and shaping:
        raise UsageError("--top-k/--top-p: they shape sampling, but --temperature 0 is greedy; "
                         "drop --temperature 0 (sampling at temperature 1) or give one above 0")
    return args.temperature


def run(args):
    """Run ``npformer generate``; exit code."""
    t = sampling_temperature(args)
    if not args.checkpoint:
        raise UsageError("checkpoint: expected a checkpoint directory, got an empty path ''")
    try:
        model, tokenizer, state = load_checkpoint(args.checkpoint)
    except CheckpointError as error:
        raise UsageError(str(error)) from None
    if not isinstance(model, DecoderLM):
        raise UsageError(f"checkpoint: {args.checkpoint} holds an {type(model).__name__}, which "
                         f"does not continue text; generate needs a decoder (DecoderLM)")
    spec = state.get("data_spec", {})
    with_bos = spec.get("data") != "text"
    prompts = _encode(args.prompt, tokenizer, with_bos, model.config.max_len)
    for text in args.prompt:
        remark = prompt_note(spec, text)
        if remark:
            note(remark)
    if args.temperature is None and t > 0:
        note("--top-k/--top-p sample, and no --temperature was given: sampling at temperature 1")
    result = generate(model, prompts, args.max_new_tokens, eos_id=tokenizer.eos_id,
                      pad_id=tokenizer.pad_id, temperature=t, top_k=args.top_k, top_p=args.top_p,
                      rng=np.random.default_rng(args.seed), use_cache=not args.no_cache,
                      return_logits=True)
    for text, ids in zip(args.prompt, result.ids):
        print(f"{text} -> {tokenizer.decode(ids)}" if with_bos else f"{text}{tokenizer.decode(ids)}")
    stopped = sum(result.hit_max_len)
    if stopped:
        longest = max(len(p) for p in prompts)
        note(f"{stopped} of {len(prompts)} continuations stopped at the model's limit of "
             f"{model.config.max_len} positions, cut before their end (the longest prompt takes "
             f"{longest}, leaving {model.config.max_len + 1 - longest} new tokens), before "
             f"--max-new-tokens {args.max_new_tokens}")
    return 0


def _encode(texts, tokenizer, with_bos, max_len):
    """The prompts as ids; a UsageError for an empty one, an unknown character, or one too long."""
    prompts = []
    for text in texts:
        if not text:
            raise UsageError("--prompt: expected a non-empty prompt")
        try:
            prompts.append(tokenizer.encode(text, bos=with_bos))
        except ValueError as error:
            raise UsageError(f"--prompt: {error}") from None
    longest = max(len(p) for p in prompts)
    if longest > max_len:
        raise UsageError(f"--prompt: {longest} tokens leave no room in the model's "
                         f"{max_len} positions")
    return prompts
