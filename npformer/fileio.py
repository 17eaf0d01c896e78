"""Writing files so that a crash never leaves half of one: write aside, then rename.

``atomic_write(path, write)`` calls ``write(file)`` on a temporary file in the same
directory, flushes it to disk and renames it over ``path`` (``os.replace`` is atomic
on one file system). If anything fails, the temporary file is removed and ``path``
is untouched. Every file npformer writes (checkpoints, Hugging Face exports) goes
through here; every file it reads is loaded without pickle.
"""
from __future__ import annotations

import json
import os
import tempfile

import numpy as np


def atomic_write(path, write, mode="wb"):
    """Write ``path`` through ``write(file)`` on a temporary sibling, then rename it into place."""
    path = os.fspath(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".",
                               prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, **({"encoding": "utf-8"} if "b" not in mode else {})) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def write_json(path, data, indent=1):
    """Write ``data`` as UTF-8 JSON, atomically."""
    return atomic_write(path, lambda f: json.dump(data, f, ensure_ascii=False, indent=indent),
                        mode="w")


def write_npz(path, arrays):
    """Write ``{name: array}`` as an uncompressed .npz, atomically."""
    return atomic_write(path, lambda f: np.savez(f, **arrays))
