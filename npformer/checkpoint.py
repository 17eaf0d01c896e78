"""Checkpoints: a directory that holds everything needed to resume or generate.

    model.npz        the weights, one array per parameter name (no pickle)
    config.json      the DecoderConfig and the weights' dtype
    tokenizer.json   the tokenizer (CharTokenizer or ByteTokenizer)
    optimizer.npz    the optimizer's buffers (AdamW's m and v, SGD's velocity)
    state.json       step, optimizer scalars, training settings, the loss history

Every file is written to a temporary name and then renamed over the old one
(``os.replace`` is atomic), so a crash mid-save never leaves a half-written
file; ``state.json`` is written last and names the step the files belong to.
Loading validates names, shapes, dtypes and the config, and raises
``CheckpointError`` (a ``ValueError``) with one clear line on a missing
directory or a truncated, foreign or mismatched file.
"""
from __future__ import annotations

import json
import os
import zipfile

import numpy as np

from .fileio import write_json, write_npz
from .model import DecoderConfig, DecoderLM
from .tokenizer import tokenizer_from_dict

FORMAT = "npformer-checkpoint"
VERSION = 1
FILES = ("model.npz", "config.json", "tokenizer.json", "optimizer.npz", "state.json")


class CheckpointError(ValueError):
    """A checkpoint that is missing, truncated, foreign or does not match the model."""


# -- reading with clear errors ----------------------------------------------------------
def read_json(path):
    """Parsed JSON of ``path``; CheckpointError for a missing, truncated or non-JSON file."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: file missing (not a complete npformer checkpoint)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{path}: not valid JSON, truncated or foreign ({error})") from None


def read_npz(path):
    """{name: array} from an .npz, loaded with allow_pickle=False."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise CheckpointError(f"{path}: file missing (not a complete npformer checkpoint)") from None
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as error:
        raise CheckpointError(f"{path}: not a readable .npz file, truncated or foreign "
                              f"({type(error).__name__}: {error})") from None


def _check_dir(directory):
    if not os.path.isdir(directory):
        what = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise CheckpointError(f"checkpoint directory {directory} {what}")


# -- save ---------------------------------------------------------------------------------
def save_checkpoint(directory, model, tokenizer=None, optimizer=None, state=None):
    """Write model, config, tokenizer, optimizer and ``state`` (a JSON-able dict) to ``directory``."""
    os.makedirs(directory, exist_ok=True)
    write_npz(os.path.join(directory, "model.npz"), model.state_dict())
    write_json(os.path.join(directory, "config.json"),
               {"format": FORMAT, "version": VERSION, "dtype": str(model.dtype),
                "model": model.config.to_dict()})
    if tokenizer is not None:
        write_json(os.path.join(directory, "tokenizer.json"), tokenizer.to_dict())
    optimizer_info = None
    if optimizer is not None:
        opt_state = optimizer.state_dict()
        write_npz(os.path.join(directory, "optimizer.npz"), opt_state["arrays"])
        optimizer_info = {k: v for k, v in opt_state.items() if k != "arrays"}
    write_json(os.path.join(directory, "state.json"),
               {"format": FORMAT, "optimizer": optimizer_info, **(state or {})})
    return directory


# -- load ----------------------------------------------------------------------------------
def load_config(directory):
    """(DecoderConfig, dtype) from ``config.json``, validated."""
    _check_dir(directory)
    path = os.path.join(directory, "config.json")
    data = read_json(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an npformer checkpoint config (format field missing)")
    if data.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint version {data.get('version')}, expected {VERSION}")
    try:
        config = DecoderConfig.from_dict(data["model"])
        dtype = np.dtype(data["dtype"])
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: invalid model config ({error})") from None
    if dtype not in (np.float32, np.float64):
        raise CheckpointError(f"{path}: dtype {dtype}, expected float32 or float64")
    return config, dtype


def load_weights(directory, model):
    """Load ``model.npz`` into ``model``: every name, shape and dtype must match exactly."""
    path = os.path.join(directory, "model.npz")
    arrays = read_npz(path)
    expected = dict(model.named_parameters())
    missing, unexpected = sorted(set(expected) - set(arrays)), sorted(set(arrays) - set(expected))
    if not set(arrays) & set(expected):
        raise CheckpointError(f"{path}: a foreign file: none of its arrays {sorted(arrays)[:3]} "
                              f"is a parameter of this model")
    if missing or unexpected:
        raise CheckpointError(f"{path}: does not match the model: {len(missing)} missing "
                              f"{missing[:3]}, {len(unexpected)} unexpected {unexpected[:3]}")
    for name, p in expected.items():
        if arrays[name].shape != p.shape or arrays[name].dtype != p.dtype:
            raise CheckpointError(f"{path}: {name!r} is {arrays[name].dtype}{list(arrays[name].shape)}, "
                                  f"the model expects {p.dtype}{list(p.shape)}")
    model.load_state_dict(arrays)
    return model


def load_model(directory):
    """Rebuild the ``DecoderLM`` saved in ``directory`` (weights validated)."""
    config, dtype = load_config(directory)
    model = DecoderLM(config, np.random.default_rng(0), dtype)
    return load_weights(directory, model)


def load_tokenizer(directory):
    """The tokenizer saved in a checkpoint directory."""
    _check_dir(directory)
    path = os.path.join(directory, "tokenizer.json")
    try:
        return tokenizer_from_dict(read_json(path), path)
    except CheckpointError:
        raise
    except ValueError as error:
        raise CheckpointError(str(error)) from None


def load_state(directory):
    """The ``state.json`` dict (step, history, settings, optimizer scalars)."""
    _check_dir(directory)
    path = os.path.join(directory, "state.json")
    state = read_json(path)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an npformer checkpoint state file")
    return state


def load_optimizer(directory, optimizer, state=None):
    """Restore the optimizer's buffers and scalars saved beside the model."""
    state = load_state(directory) if state is None else state
    info = state.get("optimizer")
    if info is None:
        raise CheckpointError(f"{directory}: the checkpoint holds no optimizer state")
    path = os.path.join(directory, "optimizer.npz")
    try:
        optimizer.load_state_dict({**info, "arrays": read_npz(path)})
    except CheckpointError:
        raise
    except (KeyError, ValueError) as error:
        raise CheckpointError(f"{path}: {error}") from None
    return optimizer


def load_checkpoint(directory):
    """(model, tokenizer, state) for generation or inspection."""
    model = load_model(directory)
    tokenizer = load_tokenizer(directory)
    if tokenizer.vocab_size != model.config.vocab_size:
        raise CheckpointError(f"{directory}: tokenizer has {tokenizer.vocab_size} ids but the "
                              f"model's vocab_size is {model.config.vocab_size}")
    return model, tokenizer, load_state(directory)
