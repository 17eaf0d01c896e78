"""Hugging Face files: ``.safetensors`` tensors and checkpoint directories, read and written.

A ``.safetensors`` file is an 8-byte little-endian length, a JSON header
``{name: {"dtype", "shape", "data_offsets"}}`` and then the raw bytes of every
tensor. A Hugging Face checkpoint directory holds ``config.json`` (the shape of
the model) and ``model.safetensors``, or shards listed in
``model.safetensors.index.json``.

Reading uses ``safetensors.numpy`` except for BF16 tensors (NumPy has no such
type): their raw bits are widened to float32, exactly. Writing goes through
``npformer.files.fileio.atomic_write`` (temporary file, then rename): an interrupted
write leaves no partial file and no temporary behind. The ``safetensors``
package is imported only when a file is touched (``pip install 'npformer[hf]'``).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..files.fileio import atomic_write, write_json
from .configs import family_of

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


def _safetensors(action):
    """The ``safetensors`` package, or ImportError with the pip command."""
    try:
        import safetensors
        import safetensors.numpy
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(f"{action} .safetensors needs the 'safetensors' package: "
                          f"pip install 'npformer[hf]'") from error
    return safetensors


# -- .safetensors files -----------------------------------------------------------------------
def _safetensors_header(path):
    """The JSON header of a .safetensors file and the byte offset where its data starts."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    return header, 8 + size


def bf16_to_float32(raw):
    """uint16 bit patterns of bfloat16 -> float32, exactly: bf16 is the top half of a float32."""
    return (np.asarray(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def read_safetensors(path):
    """{name: ndarray} from a ``.safetensors`` file (via ``safetensors.numpy``; BF16 widened to float32)."""
    safe_open = _safetensors("reading").safe_open
    header, data_start = _safetensors_header(path)
    tensors = {}
    with safe_open(str(path), framework="numpy") as f:
        for name in f.keys():
            info = header[name]
            if info["dtype"] == "BF16":          # NumPy has no bfloat16: read the raw bits
                start, end = info["data_offsets"]
                raw = np.fromfile(path, dtype="<u2", count=(end - start) // 2,
                                  offset=data_start + start)
                tensors[name] = bf16_to_float32(raw).reshape(info["shape"])
            else:
                tensors[name] = f.get_tensor(name)
    return tensors


def safetensors_bytes(tensors, metadata=None):
    """The bytes of a ``.safetensors`` file holding {name: ndarray} (``safetensors.numpy.save``)."""
    save = _safetensors("writing").numpy.save
    return save({name: np.ascontiguousarray(a) for name, a in tensors.items()}, metadata=metadata)


def write_safetensors(path, tensors, metadata=None):
    """Write {name: ndarray} as a ``.safetensors`` file, atomically; returns the path.

    The bytes are made before the file is opened, so a tensor safetensors refuses
    leaves no file at all; a failure while writing leaves ``path`` as it was.
    """
    data = safetensors_bytes(tensors, metadata)
    return atomic_write(path, lambda f: f.write(data))


# -- checkpoint directories -------------------------------------------------------------------
def read_hf_config(directory):
    """The parsed ``config.json`` of a Hugging Face checkpoint directory."""
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        raise ValueError(f"directory: expected a Hugging Face checkpoint with {CONFIG_FILE}, "
                         f"found none in {str(directory)!r}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not valid JSON, truncated or foreign ({error})") from None


def read_hf_tensors(directory):
    """{name: ndarray} of a checkpoint directory: ``model.safetensors`` or the shards its
    ``model.safetensors.index.json`` lists."""
    directory = Path(directory)
    single, index = directory / WEIGHTS_FILE, directory / INDEX_FILE
    if single.is_file():
        return read_safetensors(single)
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
        if not isinstance(weight_map, dict):
            raise ValueError(f"{index}: expected a 'weight_map' {{tensor name: shard file}}")
        tensors = {}
        for shard in sorted(set(weight_map.values())):
            tensors.update(read_safetensors(directory / shard))
        return tensors
    found = sorted(p.name for p in directory.iterdir())
    raise ValueError(f"directory: expected {WEIGHTS_FILE} (or {INDEX_FILE}) "
                     f"in {str(directory)!r}, found {found}")


def read_hf_checkpoint(directory):
    """(config dict, {name: ndarray}) from a Hugging Face checkpoint directory.

    Reads ``config.json`` and ``model.safetensors``, or the shards listed in
    ``model.safetensors.index.json``. An unsupported ``model_type`` is refused
    before any tensor is read. (npformer's own checkpoints, written during
    training, are read by ``npformer.files.checkpoint.load_checkpoint``.)
    """
    config = read_hf_config(directory)
    family_of(config)
    return config, read_hf_tensors(directory)


def write_hf_checkpoint(directory, config, tensors):
    """Write ``config.json`` and ``model.safetensors`` into ``directory``; returns it as a Path.

    Each file is replaced atomically: a failure leaves it as it was, never half
    written. The safetensors bytes are made before anything is written (a tensor the
    format refuses leaves the directory untouched), then the weights are written and
    ``config.json`` last, so a first save that fails part-way leaves no ``config.json``
    and the directory is never mistaken for a checkpoint.
    """
    data = safetensors_bytes(tensors, metadata={"format": "pt"})
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write(directory / WEIGHTS_FILE, lambda f: f.write(data))
    write_json(directory / CONFIG_FILE, config, indent=2)
    return directory


def to_numpy(value):
    """A torch tensor (any dtype, bf16 included) or array-like -> ndarray, without importing torch."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        return value.numpy()
    return np.asarray(value)
