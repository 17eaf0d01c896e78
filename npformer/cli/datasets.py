"""The data a run trains on, from the spec saved in its checkpoint: a built-in set
(``aftersales``, ``aftersales-en``, ``reverse``, ``add``) or a UTF-8 text file; and what
a prompt of each built-in set looks like (``PROMPT_FORMATS``)."""
from __future__ import annotations

import hashlib
import re
from typing import Callable, NamedTuple

import numpy as np

from ..training.data import (LANGUAGES, ExampleSource, TextSource, addition_task, aftersales,
                             aftersales_corpus, encode_examples, reverse_task)
from ..tokenizer import CharTokenizer
from ..training.loop import answer_accuracy, evaluate_loss
from .common import UsageError, read_input_file

BUILTIN = ("aftersales", "aftersales-en", "reverse", "add")


class Prepared(NamedTuple):
    """Everything a run needs from its data."""

    source: object                 # ExampleSource or TextSource
    tokenizer: CharTokenizer
    evaluate: Callable             # model -> {"heldout_loss": ..., ...}
    heldout: list | None           # held-out Examples (built-in sets only)
    probe: str                     # a prompt whose attention the plots show
    bos: bool                      # prompts start with <bos> (built-in sets) or not (text)
    example: str                   # a prompt to try with ``npformer generate``


class PromptFormat(NamedTuple):
    """What a prompt of a built-in set looks like, what its answer is, and one to try."""

    form: str                      # the prompt in words, for --help and for notes
    answer: str                    # the answer in words
    pattern: re.Pattern            # every prompt of the set matches it in full
    example: str


def _question_forms(lang):
    """A pattern matching every phrasing of the after-sales templates, any item and value."""
    _, templates = LANGUAGES[lang]
    forms = [re.escape(phrasing).replace(re.escape("{item}"), ".+").replace(re.escape("{value}"), ".+")
             for spec in templates.values() for phrasing in spec["phrasings"]]
    return re.compile("|".join(forms))


PROMPT_FORMATS = {
    "aftersales": PromptFormat("a question in the form of a Chinese template",
                               "its rule's reply (不在保修范围)", _question_forms("zh"),
                               "耳机坏了，原因是进水，保修吗？"),
    "aftersales-en": PromptFormat("a question in the form of an English template",
                                  "its rule's reply (not covered)", _question_forms("en"),
                                  "headset broke by water. warranty?"),
    "reverse": PromptFormat("five digits, then '>'", "the digits reversed (54321)",
                            re.compile(r"[0-9]{5}>"), "12345>"),
    "add": PromptFormat("two two-digit numbers (07 for 7), '+' and '='",
                        "the sum in three digits, written backwards (580, for 085)",
                        re.compile(r"[0-9]{2}\+[0-9]{2}="), "27+58="),
}


def prompt_note(spec, prompt):
    """The one-line note a prompt gets when it cannot belong to the run's built-in set, else None."""
    name = spec.get("data")
    form = PROMPT_FORMATS.get(name)
    if form is None or form.pattern.fullmatch(prompt):
        return None
    return (f"--prompt {prompt!r} is not a prompt of {name} ({form.form}, e.g. {form.example!r}), "
            f"the only kind its model was trained on")


# The most a --text file may hold: a char-level model trained on a CPU learns from far less,
# and the file's characters become one id each in memory (a list of Python ints, ~30 bytes
# an id), so a larger file costs gigabytes before the first step.
TEXT_LIMIT = 16 * 2 ** 20


def read_text_file(path):
    """(text, SHA-256 of its bytes) of a UTF-8 text file, or a UsageError naming the problem:
    a regular file of at most ``TEXT_LIMIT`` bytes (a device, a FIFO or a directory is
    refused before it is opened)."""
    raw = read_input_file("--text", path, TEXT_LIMIT, what="a UTF-8 text file",
                          too_big="; a char-level model on a CPU learns from much less: "
                                  "train on a part of it")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(f"--text: {path} is not UTF-8 text (byte 0x{raw[error.start]:02x} at "
                         f"offset {error.start})") from None
    text = text.removeprefix("\ufeff")     # a byte-order mark, as some editors write: no character
    if not text.strip():
        raise UsageError(f"--text: {path} is empty")
    return text, hashlib.sha256(raw).hexdigest()


def text_spec(path, seq_len):
    """The data spec of a ``--text`` run (the file's hash lets a resume notice a change)."""
    _, digest = read_text_file(path)
    return {"data": "text", "path": path, "seq_len": seq_len, "sha256": digest}


def builtin(name, tokenizer=None):
    """(train examples, held-out examples, tokenizer) of a built-in data set."""
    if name == "aftersales":
        split, corpus = aftersales(), aftersales_corpus()
    elif name == "aftersales-en":
        split, corpus = aftersales(lang="en"), aftersales_corpus("en")
    elif name == "reverse":
        split, corpus = reverse_task(), "0123456789>"
    else:
        split, corpus = addition_task(), "0123456789+="
    return split.train, split.heldout, tokenizer or CharTokenizer.from_corpus(corpus)


def prepare(spec, tokenizer=None, checkpoint_dir=None):
    """The ``Prepared`` data of a spec; ``tokenizer``: the one a resumed checkpoint holds."""
    if spec.get("data") == "text":
        return _prepare_text(spec, tokenizer, checkpoint_dir)
    if spec.get("data") not in BUILTIN:
        raise UsageError(f"--data: expected one of {BUILTIN}, got {spec.get('data')!r}")
    train_set, heldout, tokenizer = builtin(spec["data"], tokenizer)
    source = ExampleSource(encode_examples(tokenizer, train_set), tokenizer.pad_id)
    held_source = ExampleSource(encode_examples(tokenizer, heldout), tokenizer.pad_id)

    def evaluate(model):
        accuracy, _ = answer_accuracy(model, tokenizer, heldout)
        return {"heldout_loss": evaluate_loss(model, held_source.batches(256)),
                "heldout_accuracy": accuracy}
    return Prepared(source, tokenizer, evaluate, heldout, heldout[0].prompt, True,
                    PROMPT_FORMATS[spec["data"]].example)


def _prepare_text(spec, tokenizer, checkpoint_dir):
    path = spec["path"]
    text, digest = read_text_file(path)
    if spec.get("sha256") not in (None, digest):
        raise UsageError(f"--text: {path} has changed since the checkpoint in {checkpoint_dir} "
                         f"was saved (its SHA-256 differs); restore it or start a new run")
    tokenizer = tokenizer or CharTokenizer.from_corpus(text)
    missing = tokenizer.unknown_chars(text)
    if missing:
        raise UsageError(f"--text: {path} has characters the checkpoint's tokenizer "
                         f"cannot encode: {''.join(missing[:10])!r}")
    ids = tokenizer.encode(text)
    if len(ids) < 2:
        raise UsageError(f"--text: {path} is too short to train on (one character)")
    cut = max(1, int(len(ids) * 0.95)) if len(ids) > 40 else len(ids)
    if spec["seq_len"] > cut - 1:
        raise UsageError(f"--seq-len: {spec['seq_len']} is longer than the text allows: {path} "
                         f"has {len(ids)} characters, {cut} of them for training; use "
                         f"--seq-len {max(cut - 1, 1)} or less")
    source = TextSource(ids[:cut], spec["seq_len"])
    held = TextSource(ids[cut - 1:], spec["seq_len"]) if len(ids) - cut > 2 else None

    def evaluate(model):
        if held is None:
            return {}
        batch = held.sample(np.random.default_rng(0), 16)
        return {"heldout_loss": evaluate_loss(model, [batch])}
    probe = text[cut - 1:][:min(spec["seq_len"], 24)] if held is not None else text[:min(spec["seq_len"], 24)]
    opening = text.strip().splitlines()[0][:12]
    return Prepared(source, tokenizer, evaluate, None, probe, False, opening)
