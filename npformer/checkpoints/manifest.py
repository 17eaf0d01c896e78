"""Reading a checkpoint's files: ``checkpoint.json`` says which folder is current and what each
of its files must be (size, SHA-256); every file is checked against that before it is
trusted, and against a size limit before it is read. ``checkpoint.py`` builds on this."""
from __future__ import annotations

import functools
import hashlib
import os
import re

from ..core import fileio

FORMAT = "npformer-checkpoint"
MANIFEST = "checkpoint.json"
_FOLDER = re.compile(r"^step-\d{8,}\.[A-Za-z0-9_]+$")


class CheckpointError(ValueError):
    """A checkpoint that is missing, truncated, foreign, or whose files do not belong together."""


# -- reading files with clear errors -----------------------------------------------------
_read_bytes = functools.partial(fileio.read_bytes, error=CheckpointError,
                                incomplete="not a complete npformer checkpoint")
_parse_json = functools.partial(fileio.parse_json, error=CheckpointError)
_parse_npz = functools.partial(fileio.parse_npz, error=CheckpointError)


def read_json(path):
    """Parsed JSON of ``path``; CheckpointError for a missing, truncated or non-JSON file."""
    return _parse_json(path, _read_bytes(path))


# -- where the current files are -------------------------------------------------------------
def _manifest(directory):
    """(folder path, {file name: sha256}) of the current checkpoint; (directory, None) for the
    first layout."""
    if not os.path.isdir(directory):
        what = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise CheckpointError(f"checkpoint directory {directory} {what}")
    path = os.path.join(directory, MANIFEST)
    if not os.path.exists(path):
        return os.fspath(directory), None
    data = read_json(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an npformer checkpoint manifest")
    folder, files = data.get("folder"), data.get("files")
    if not isinstance(folder, str) or not _FOLDER.match(folder) or not isinstance(files, dict):
        raise CheckpointError(f"{path}: damaged (expected a folder name and the files' hashes)")
    return os.path.join(directory, folder), {name: _Recorded(info) for name, info in files.items()}


class _Recorded:
    """What checkpoint.json records of one file: its SHA-256 and its size in bytes."""

    def __init__(self, info):
        info = info if isinstance(info, dict) else {}
        self.sha256 = info.get("sha256")
        size = info.get("bytes")
        self.size = size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None


# The most a JSON file of a checkpoint may hold when checkpoint.json gives no size (the first
# layout): a loss history of a million steps is about 75 MB.
JSON_LIMIT = 256 * 2 ** 20


def _read_verified(folder, hashes, name, limit=JSON_LIMIT, why=None):
    """The bytes of one checkpoint file, checked against its recorded size and hash when there
    are some, else against ``limit`` (the most its config justifies), before it is read."""
    path = os.path.join(folder, name)
    if hashes is not None and name not in hashes:
        raise CheckpointError(f"{path}: not part of this checkpoint (missing from {MANIFEST})")
    recorded = hashes[name] if hashes is not None else None
    if recorded is not None and recorded.size is not None:
        found = _read_size(path)
        if found > recorded.size:              # refused unread: it cannot match the hash
            raise CheckpointError(f"{path}: its contents differ from the {recorded.size:,} bytes "
                                  f"recorded in {MANIFEST} (it holds {found:,}; edited or damaged "
                                  f"after saving)")
        data = _read_bytes(path, limit=recorded.size, why=f"the size recorded in {MANIFEST}")
    else:
        data = _read_bytes(path, limit=limit, why=why or "a checkpoint's JSON file")
    if recorded is not None and hashlib.sha256(data).hexdigest() != recorded.sha256:
        raise CheckpointError(f"{path}: its contents differ from the SHA-256 in {MANIFEST} "
                              f"(edited or damaged after saving)")
    return data


def _read_size(path):
    return fileio.file_size(path, CheckpointError, "not a complete npformer checkpoint")


