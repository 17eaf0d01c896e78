"""Checkpoints: everything needed to resume a run or to generate, saved as one unit.

A decoder (``DecoderLM``) is what ``train`` saves; an ``Encoder`` or an ``EncoderDecoder``
saves and loads the same way (``config.json`` names the kind, ``KINDS``).

    run/                         the directory you name (``--out``)
      checkpoint.json            which folder is current, its step, and each file's SHA-256
      step-00000400.x7k2q9/      the current checkpoint:
        model.npz                the weights, one array per parameter name (no pickle)
        config.json              the model's kind, its config and the weights' dtype
        tokenizer.json           the tokenizer (CharTokenizer or ByteTokenizer)
        optimizer.npz            the optimizer's buffers (AdamW's m and v, SGD's velocity)
        state.json               step, optimizer scalars, training settings, the loss history

Saving writes a new folder (first as ``.partial-*``), flushes every file to disk,
renames the folder, and only then replaces ``checkpoint.json`` by an atomic rename,
the moment the new checkpoint becomes current; older folders and leftovers of
interrupted saves are removed after. Killed at any moment, the directory holds
the previous checkpoint or the new one, each whole; a failed save (a full disk)
leaves the previous one current and raises ``CheckpointSaveError``.

Loading follows ``checkpoint.json``, checks each file against its hash, then the
files against each other (weights against the config, the tokenizer against the
vocabulary, the step against the run's length and the optimizer); a problem is a
``CheckpointError`` (a ``ValueError``), one line naming the file. The first layout (the
five files directly in the directory) still loads, checked the same way but without hashes.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass

import numpy as np

from ..core import fileio
from . import budget
from .manifest import (FORMAT, JSON_LIMIT, MANIFEST, _FOLDER, CheckpointError, _manifest,
                       _parse_json, _parse_npz, _read_size, _read_verified, read_json)
from ..t10_model import DecoderConfig, DecoderLM
from ..t15_encoder import Encoder, EncoderConfig
from ..t17_seq2seq import EncoderDecoder, Seq2SeqConfig
from ..tokenizer import tokenizer_from_dict

VERSION = 1                       # of config.json
LAYOUT = 2                        # of the directory: 1 = five files, 2 = checkpoint.json + folder
FILES = ("model.npz", "config.json", "tokenizer.json", "optimizer.npz", "state.json")
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_PARTIAL = ".partial-"
# config.json's "kind" -> (the config class, the model class). A config.json without one
# holds a decoder: the only kind the first checkpoints were written for.
KINDS = {"decoder": (DecoderConfig, DecoderLM), "encoder": (EncoderConfig, Encoder),
         "encoder-decoder": (Seq2SeqConfig, EncoderDecoder)}


def model_kind(model):
    """The ``KINDS`` key of ``model``, or a TypeError naming the classes a checkpoint holds."""
    for kind, (_, model_class) in KINDS.items():
        if isinstance(model, model_class):
            return kind
    names = ", ".join(model_class.__name__ for _, model_class in KINDS.values())
    raise TypeError(f"model: a checkpoint holds one of {names}, got {type(model).__name__}")


class CheckpointSaveError(OSError):
    """A save failed (a full disk, no permission); the previous checkpoint is still current."""


def checkpoint_exists(directory):
    """True if ``directory`` holds a checkpoint (either layout)."""
    return any(os.path.exists(os.path.join(directory, name)) for name in (MANIFEST, "state.json"))


# -- checks: each file, and the files against each other --------------------------------------
def _parse_config(path, data):
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an npformer checkpoint config (format field missing)")
    if data.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint version {data.get('version')}, expected {VERSION}")
    kind = data.get("kind", "decoder")
    if kind not in KINDS:
        raise CheckpointError(f"{path}: kind {kind!r}, expected one of {list(KINDS)}")
    try:
        config = KINDS[kind][0].from_dict(data["model"])
        dtype = np.dtype(data["dtype"])
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: invalid model config ({error})") from None
    if dtype not in DTYPES:
        raise CheckpointError(f"{path}: dtype {dtype}, expected float32 or float64")
    return config, dtype


def _check_state(path, state):
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an npformer checkpoint state file")
    step = state.get("step", 0)
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f"{path}: step {step!r}, expected an integer >= 0")
    settings = state.get("train_config")
    if settings is None:
        return state
    steps = settings.get("steps") if isinstance(settings, dict) else None
    if not isinstance(steps, int) or steps < 1:
        raise CheckpointError(f"{path}: train_config.steps {steps!r}, expected an integer >= 1")
    if step > steps:
        raise CheckpointError(f"{path}: step {step} of a {steps}-step run (edited or damaged)")
    history = state.get("history")
    if not isinstance(history, dict) or not isinstance(history.get("loss"), list) or \
            len(history["loss"]) != step:
        raise CheckpointError(f"{path}: the loss history does not cover the {step} steps done")
    return state


def _check_weights(path, arrays, model, described_by):
    expected = dict(model.named_parameters())
    missing, unexpected = sorted(set(expected) - set(arrays)), sorted(set(arrays) - set(expected))
    if not set(arrays) & set(expected):
        raise CheckpointError(f"{path}: a foreign file: none of its arrays {sorted(arrays)[:3]} "
                              f"is a parameter of this model")
    if missing or unexpected:
        raise CheckpointError(f"{path}: does not match {described_by}: {len(missing)} missing "
                              f"{missing[:3]}, {len(unexpected)} unexpected {unexpected[:3]}")
    for name, p in expected.items():
        if arrays[name].shape != p.shape or arrays[name].dtype != p.dtype:
            raise CheckpointError(f"{path}: {name!r} is {arrays[name].dtype}{list(arrays[name].shape)}, "
                                  f"expected {p.dtype}{list(p.shape)} (from {described_by})")


def _check_optimizer_step(path, state):
    info = state.get("optimizer")
    if "train_config" in state and isinstance(info, dict) and info.get("steps") != state.get("step"):
        raise CheckpointError(f"{path}: the optimizer has taken {info.get('steps')} steps but "
                              f"state.json says the run is at step {state.get('step')}")


# -- a checkpoint read as a whole ----------------------------------------------------------------
@dataclass
class Checkpoint:
    """One checkpoint read from disk: every file parsed and checked, the files against each other."""

    directory: str
    folder: str            # where its files are (the directory itself in the first layout)
    config: object         # DecoderConfig, EncoderConfig or Seq2SeqConfig (``KINDS``)
    dtype: np.dtype
    state: dict
    tokenizer: object = None
    weights: dict = None
    optimizer_arrays: dict = None

    def path(self, name):
        """The path of one of its files."""
        return os.path.join(self.folder, name)

    @property
    def step(self):
        """The step the checkpoint was saved at (0 if it holds no training state)."""
        return self.state.get("step", 0)

    def require_tokenizer(self):
        """The tokenizer, or a CheckpointError if the checkpoint has none."""
        if self.tokenizer is None:
            raise CheckpointError(f"{self.path('tokenizer.json')}: file missing "
                                  f"(not a complete npformer checkpoint)")
        return self.tokenizer

    def model(self):
        """The saved model (a ``DecoderLM``, ``Encoder`` or ``EncoderDecoder``) with its weights."""
        return self.load_weights(_build(self.config, self.dtype))

    def load_weights(self, model):
        """Copy the saved weights into ``model`` (names, shapes and dtypes must match)."""
        _check_weights(self.path("model.npz"), self.weights, model, "the model")
        model.load_state_dict(self.weights)
        return model

    def load_optimizer(self, optimizer):
        """Restore the optimizer's buffers and scalars."""
        info = self.state.get("optimizer")
        if info is None or self.optimizer_arrays is None:
            raise CheckpointError(f"{self.directory}: the checkpoint holds no optimizer state")
        try:
            optimizer.load_state_dict({**info, "arrays": self.optimizer_arrays})
        except (KeyError, TypeError, ValueError) as error:
            raise CheckpointError(f"{self.path('optimizer.npz')}: {error}") from None
        return optimizer


def read_checkpoint(directory, weights=True):
    """Read and check the checkpoint in ``directory``; ``weights=False`` skips the .npz files."""
    # A save may make another folder current, and remove this one, while it is being read:
    # then read again from the new one. Each folder is complete before it becomes current
    # and its files are checked against their hashes, so what is returned is one whole step.
    for attempt in range(READ_ATTEMPTS):
        folder, hashes = _manifest(directory)
        try:
            return _read_folder(directory, folder, hashes, weights)
        except CheckpointError:
            if attempt == READ_ATTEMPTS - 1 or hashes is None or _manifest(directory)[0] == folder:
                raise


READ_ATTEMPTS = 5


def _read_folder(directory, folder, hashes, weights):
    def present(name):
        return name in hashes if hashes is not None else os.path.exists(os.path.join(folder, name))

    def load(name, parse):
        return parse(os.path.join(folder, name), _read_verified(folder, hashes, name))

    def parse_within(name, limit, why):
        return _parse_npz(os.path.join(folder, name), _read_verified(folder, hashes, name, limit, why))

    config_path = os.path.join(folder, "config.json")
    config, dtype = _parse_config(config_path, load("config.json", _parse_json))
    state = _check_state(os.path.join(folder, "state.json"), load("state.json", _parse_json))
    checkpoint = Checkpoint(os.fspath(directory), folder, config, dtype, state)
    if present("tokenizer.json"):
        path = os.path.join(folder, "tokenizer.json")
        try:
            checkpoint.tokenizer = tokenizer_from_dict(load("tokenizer.json", _parse_json), path)
        except ValueError as error:                     # CheckpointError is one too
            raise CheckpointError(str(error)) from None
        if checkpoint.tokenizer.vocab_size > config.vocab_size:
            raise CheckpointError(f"{path}: {checkpoint.tokenizer.vocab_size} ids, more than the "
                                  f"vocab_size {config.vocab_size} of {config_path}")
    if weights:
        # The config's sizes against the weight file and the memory, before anything is read
        # or built: a config.json claiming 10**7 layers is refused here, in a moment.
        numbers, itemsize = budget.parameter_count(config), dtype.itemsize
        model_path = checkpoint.path("model.npz")
        try:
            budget.check_model_fits(config_path, config, numbers, itemsize, error=CheckpointError)
        except CheckpointError:
            # too big to load; if the weight file is too small for it as well, say that (an .npz
            # holds its arrays uncompressed: its size bounds theirs)
            budget.check_model_fits(config_path, config, numbers, itemsize, error=CheckpointError,
                                    file_bytes=_read_size(model_path), files=model_path)
            raise
        limit = numbers * itemsize + _npz_overhead(config)
        why = f"the {numbers:,} parameters of {config_path}"
        checkpoint.weights = parse_within("model.npz", limit, why)
        budget.check_model_fits(config_path, config, numbers, itemsize, error=CheckpointError,
                                file_bytes=sum(a.nbytes for a in checkpoint.weights.values()),
                                files=model_path)
        shape_of = _build(config, dtype)
        _check_weights(model_path, checkpoint.weights, shape_of, config_path)
        if state.get("optimizer") is not None and present("optimizer.npz"):
            checkpoint.optimizer_arrays = parse_within(
                "optimizer.npz", 3 * numbers * itemsize + _npz_overhead(config),
                f"an optimizer of the {numbers:,} parameters of {config_path}")
            _check_optimizer_step(checkpoint.path("optimizer.npz"), state)
    return checkpoint


def _build(config, dtype):
    """The model a config describes, with fresh weights (the saved ones are loaded after)."""
    model_class = next(model for config_class, model in KINDS.values()
                       if type(config) is config_class)
    return model_class(config, np.random.default_rng(0), dtype)


def _npz_overhead(config):
    """Room for an .npz's own bytes beside the arrays: its zip entries and .npy headers
    (well under 1 KiB an array; a layer has at most a few dozen arrays)."""
    layers = sum(getattr(config, name, 0) or 0
                 for name in ("n_layers", "n_encoder_layers", "n_decoder_layers"))
    return 2 ** 20 + 1024 * 64 * (layers + 1)


# -- the loaders by part (each reads the current checkpoint) ------------------------------------
def _load_one(directory, name, parse, limit=JSON_LIMIT, why=None):
    folder, hashes = _manifest(directory)
    path = os.path.join(folder, name)
    return path, parse(path, _read_verified(folder, hashes, name, limit, why))


def load_state(directory):
    """The ``state.json`` dict (step, history, settings, optimizer scalars), validated."""
    return _check_state(*_load_one(directory, "state.json", _parse_json))


def load_weights(directory, model):
    """Load the saved weights into ``model``: every name, shape and dtype must match exactly."""
    limit = sum(p.data.nbytes for p in model.parameters()) + 2 ** 20 + 1024 * len(model.state_dict())
    path, arrays = _load_one(directory, "model.npz", _parse_npz, limit, "the model's parameters")
    _check_weights(path, arrays, model, "the model")
    model.load_state_dict(arrays)
    return model


def load_model(directory):
    """Rebuild the model saved in ``directory`` (weights validated)."""
    return read_checkpoint(directory).model()


def load_optimizer(directory, optimizer):
    """Restore the optimizer's buffers and scalars saved beside the model."""
    return read_checkpoint(directory).load_optimizer(optimizer)


def load_checkpoint(directory):
    """(model, tokenizer, state) for generation or inspection; every file checked."""
    checkpoint = read_checkpoint(directory)
    return checkpoint.model(), checkpoint.require_tokenizer(), checkpoint.state


# -- save ------------------------------------------------------------------------------------
def checkpoint_contents(model, tokenizer=None, optimizer=None, state=None):
    """{file name: bytes} of a checkpoint, ready to be written."""
    kind = model_kind(model)
    dtypes = {p.dtype for p in model.parameters()}
    if len(dtypes) != 1 or model.dtype not in DTYPES:
        raise TypeError(f"model: a checkpoint holds float32 or float64 weights, got "
                        f"{sorted(map(str, dtypes))}; convert with model.astype(np.float32)")
    step = (state or {}).get("step", 0)
    if not isinstance(step, int) or step < 0:
        raise TypeError(f"state: its 'step' must be an integer >= 0, got {step!r}")
    contents = {"model.npz": fileio.npz_bytes(model.state_dict()),
                "config.json": fileio.json_bytes({"format": FORMAT, "version": VERSION,
                                                  "kind": kind, "dtype": str(model.dtype),
                                                  "model": model.config.to_dict()}, "config")}
    if tokenizer is not None:
        contents["tokenizer.json"] = fileio.json_bytes(tokenizer.to_dict(), "tokenizer")
    optimizer_info = None
    if optimizer is not None:
        opt_state = optimizer.state_dict()
        contents["optimizer.npz"] = fileio.npz_bytes(opt_state["arrays"])
        optimizer_info = {k: v for k, v in opt_state.items() if k != "arrays"}
    contents["state.json"] = fileio.json_bytes({"format": FORMAT, "optimizer": optimizer_info,
                                                **(state or {})}, "state")
    return contents


def save_checkpoint(directory, model, tokenizer=None, optimizer=None, state=None):
    """Save model, config, tokenizer, optimizer and ``state`` (a JSON-ready dict, its
    "step" naming the folder) as the new current checkpoint of ``directory``."""
    contents = checkpoint_contents(model, tokenizer, optimizer, state)
    step = (state or {}).get("step", 0)
    try:
        os.makedirs(directory, exist_ok=True)
        folder = _write_folder(directory, contents, step)
        try:
            manifest = {"format": FORMAT, "layout": LAYOUT, "folder": folder, "step": step,
                        "files": {name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
                                  for name, data in contents.items()}}
            fileio.write_json(os.path.join(directory, MANIFEST), manifest)   # now it is current
        except BaseException:
            shutil.rmtree(os.path.join(directory, folder), ignore_errors=True)
            raise
    except OSError as error:
        failure = CheckpointSaveError(f"could not save the checkpoint in {directory}: "
                                      f"{error.strerror or error}; {_previous(directory)}")
        failure.errno = error.errno
        raise failure from None
    with contextlib.suppress(OSError):      # the rename is done; making it durable is best effort
        fileio.sync_directory(directory)
    _remove_stale(directory, keep=folder)
    return directory


def _write_folder(directory, contents, step):
    """Write the files into a fresh folder, flush them, and give it its final name."""
    partial = tempfile.mkdtemp(prefix=_PARTIAL, dir=directory)
    try:
        os.chmod(partial, 0o777 & ~fileio.umask())   # mkdtemp makes it private; a run is shared like its files
        for name, data in contents.items():
            fileio.write_bytes(os.path.join(partial, name), data)
        fileio.sync_directory(partial)
        name = f"step-{step:08d}.{os.path.basename(partial)[len(_PARTIAL):]}"
        os.rename(partial, os.path.join(directory, name))
        return name
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def _previous(directory):
    try:
        return f"the previous checkpoint (step {load_state(directory).get('step', 0)}) is still current"
    except CheckpointError:
        return "no earlier checkpoint is there"


def _remove_stale(directory, keep):
    """Remove older folders, leftovers of interrupted saves and a superseded first-layout copy."""
    first_layout = False
    with contextlib.suppress(CheckpointError, AttributeError):
        first_layout = read_json(os.path.join(directory, "state.json")).get("format") == FORMAT
    for entry in os.listdir(directory):
        path = os.path.join(directory, entry)
        if entry != keep and (entry.startswith(_PARTIAL) or _FOLDER.match(entry)) and os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif fileio.is_leftover(entry, (MANIFEST,) + FILES) or (first_layout and entry in FILES):
            with contextlib.suppress(OSError):          # cleaning up is best effort
                os.remove(path)
