"""Hugging Face files: ``.safetensors`` tensors and checkpoint directories, read and written.

A ``.safetensors`` file is an 8-byte little-endian length, a JSON header
``{name: {"dtype", "shape", "data_offsets"}}`` and then the raw bytes of every
tensor. A Hugging Face checkpoint directory holds ``config.json`` (the shape of
the model) and ``model.safetensors``, or shards listed in
``model.safetensors.index.json``.

Reading uses ``safetensors.numpy`` except for BF16 tensors (NumPy has no such
type): their raw bits are widened to float32, exactly. Writing goes through
``npformer.core.fileio.atomic_write`` (temporary file, then rename): an interrupted
write leaves no partial file and no temporary behind. The ``safetensors``
package is imported only when a file is touched (``pip install safetensors``, npformer's ``hf`` extra).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..core.fileio import atomic_write, file_size, read_bytes, write_json
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
                          f"pip install safetensors (npformer's [hf] extra)") from error
    return safetensors


# -- .safetensors files -----------------------------------------------------------------------
HEADER_LIMIT = 100 * 2 ** 20        # the safetensors format's own cap on a header's size
_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
             "U8": 1, "BOOL": 1, "U16": 2, "U32": 4, "U64": 8}


def _safetensors_header(path):
    """The JSON header of a .safetensors file and the byte offset where its data starts,
    every length and offset checked against the file's size before anything is read."""
    size = file_size(path)
    with open(path, "rb") as f:
        length = int.from_bytes(f.read(8), "little")
        if size < 8 or length > min(size - 8, HEADER_LIMIT):
            raise ValueError(f"{path}: safetensors header length {length:,} is beyond the "
                             f"file's {size:,} bytes (or the format's {HEADER_LIMIT:,}-byte "
                             f"limit): truncated or not a .safetensors file")
        try:
            header = json.loads(f.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{path}: safetensors header is not valid JSON ({error})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: safetensors header is not a JSON object")
    data = size - 8 - length
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            start, end = info["data_offsets"]
            count = int(np.prod(info["shape"], dtype=object))
            width = _ITEMSIZE[info["dtype"]]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}: tensor {name!r} has no valid dtype, shape and "
                             f"data_offsets in the header") from None
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= data) \
                or end - start != count * width:
            raise ValueError(f"{path}: tensor {name!r} data_offsets [{start}, {end}] do not fit "
                             f"its {info['dtype']}{list(info['shape'])} inside the file's "
                             f"{data:,} bytes of data")
    return header, 8 + length


def bf16_to_float32(raw):
    """uint16 bit patterns of bfloat16 -> float32, exactly: bf16 is the top half of a float32."""
    return (np.asarray(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def read_safetensors(path):
    """{name: ndarray} from a ``.safetensors`` file (via ``safetensors.numpy``; BF16 widened to float32)."""
    header, data_start = _safetensors_header(path)       # checked before anything is read
    safe_open = _safetensors("reading").safe_open
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
    return _read_json(path)


JSON_LIMIT = 64 * 2 ** 20           # a config.json or a shard index is a few kilobytes


def _read_json(path):
    """A small JSON file: a regular file, at most ``JSON_LIMIT`` bytes, parsed."""
    data = read_bytes(path, limit=JSON_LIMIT, why="a Hugging Face JSON file")
    try:
        return json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not valid JSON, truncated or foreign ({error})") from None


def shard_paths(directory):
    """The shard files ``model.safetensors.index.json`` lists, each checked to be a file name
    inside ``directory`` (an entry like ``../x`` or ``/etc/x`` is refused, naming it)."""
    directory = Path(directory)
    index = directory / INDEX_FILE
    data = _read_json(index)
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict):
        raise ValueError(f"{index}: expected a 'weight_map' {{tensor name: shard file}}")
    root = os.path.abspath(directory)
    shards = []
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not shard:
            raise ValueError(f"{index}: weight_map[{name!r}] = {shard!r}, expected a file name")
        # judged by name, not by where symlinks lead: the Hugging Face cache links each file
        # of a snapshot to a blob elsewhere
        path = Path(os.path.normpath(os.path.join(root, shard)))
        if os.path.isabs(shard) or os.path.commonpath([root, str(path)]) != root or str(path) == root:
            raise ValueError(f"{index}: weight_map[{name!r}] = {shard!r} points outside "
                             f"{directory} (shards must be files in the index's folder)")
        if path not in shards:
            shards.append(path)
    return sorted(shards)


def read_hf_tensors(directory):
    """{name: ndarray} of a checkpoint directory: ``model.safetensors`` or the shards its
    ``model.safetensors.index.json`` lists."""
    directory = Path(directory)
    single, index = directory / WEIGHTS_FILE, directory / INDEX_FILE
    if single.is_file():
        return read_safetensors(single)
    if index.is_file():
        tensors = {}
        for shard in shard_paths(directory):
            tensors.update(read_safetensors(shard))
        return tensors
    found = sorted(p.name for p in directory.iterdir())
    raise ValueError(f"directory: expected {WEIGHTS_FILE} (or {INDEX_FILE}) "
                     f"in {str(directory)!r}, found {found}")


def read_hf_checkpoint(directory):
    """(config dict, {name: ndarray}) from a Hugging Face checkpoint directory.

    Reads ``config.json`` and ``model.safetensors``, or the shards listed in
    ``model.safetensors.index.json``. An unsupported ``model_type`` is refused
    before any tensor is read. (npformer's own checkpoints, written during
    training, are read by ``npformer.checkpoints.checkpoint.load_checkpoint``.)
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
