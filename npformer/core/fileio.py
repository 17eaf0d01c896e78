"""Files: written so that a crash never leaves half of one, read without pickle.

``atomic_write(path, write)`` calls ``write(file)`` on a temporary file in the same
directory, flushes it to disk and renames it over ``path`` (``os.replace`` is atomic
on one file system). If anything fails, the temporary file is removed and ``path``
is untouched. A process killed mid-write can leave a temporary ``.NAME.*.tmp``
behind: ``is_leftover`` recognises it for clean-up. Every file npformer writes
(checkpoints, Hugging Face exports) goes through here. The readers load without
pickle and turn a missing, truncated or foreign file into one clear error line.
"""
from __future__ import annotations

import io
import json
import os
import stat
import tempfile
import zipfile

import numpy as np


def umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path, write, mode="wb"):
    """Write ``path`` through ``write(file)`` on a temporary sibling, then rename it into place.

    ``path`` must be new, a regular file or a symlink (the link is replaced, never its
    target): a rename over a device or a FIFO would replace the node itself (as root,
    /dev/zero with a file), so those are refused with a ValueError naming the path.
    """
    path = os.fspath(path)
    check_replaceable(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".",
                               prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~umask())        # mkstemp makes it private; give it the usual mode
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


def check_replaceable(path):
    """ValueError unless ``path`` does not exist, is a regular file or is a symlink."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError:
        return                  # cannot look: the write itself will say why it fails
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise ValueError(f"{path}: {file_kind(mode)}, expected a regular file to write "
                         f"(npformer replaces files, never devices, pipes or folders)")


def write_bytes(path, data):
    """Write ``data`` (bytes), atomically."""
    return atomic_write(path, lambda f: f.write(data))


def json_bytes(data, what="data", indent=1):
    """``data`` as UTF-8 JSON bytes; a TypeError naming ``what`` if it is not JSON-ready."""
    try:
        return json.dumps(data, ensure_ascii=False, indent=indent, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise TypeError(f"{what}: expected a JSON-ready dict (str, int, finite float, list, "
                        f"dict), got {error}") from None


def npz_bytes(arrays):
    """``{name: array}`` as the bytes of an uncompressed .npz."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def write_json(path, data, indent=1):
    """Write ``data`` as UTF-8 JSON, atomically."""
    return write_bytes(path, json_bytes(data, os.fspath(path), indent))


def sync_directory(path):
    """Flush a directory's entries (new names, renames) to disk; POSIX only, elsewhere nothing."""
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_leftover(entry, names):
    """True if ``entry`` is a temporary file ``atomic_write`` left behind for one of ``names``."""
    return entry.endswith(".tmp") and any(entry.startswith(f".{name}.") for name in names)


# -- reading ------------------------------------------------------------------------------
def file_kind(mode):
    """What a non-regular file is, in words."""
    for test, word in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a regular file"


def file_size(path, error=ValueError, incomplete="a file is missing"):
    """The size of ``path``, which must be a regular file (a symlink is followed: one to
    /dev/zero or to a FIFO is refused before anything is read)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise error(f"{path}: file missing ({incomplete})") from None
    except OSError as failure:
        raise error(f"{path}: cannot be read ({failure.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{path}: {file_kind(info.st_mode)}, expected a regular file")
    return info.st_size


def read_bytes(path, error=ValueError, incomplete="a file is missing", size=None, limit=None,
               why="its stated size"):
    """The bytes of ``path``; ``error`` (an exception class) naming the file if it cannot be read.

    The file must be a regular file; ``size``: the exact size it must have, ``limit``: the
    most it may hold (``why`` says where the number comes from). Both are checked before
    reading, and no more than the file's size is ever read (a file that grows meanwhile
    is refused).
    """
    found = file_size(path, error, incomplete)
    if size is not None and found != size:
        raise error(f"{path}: {found} bytes, but {why} is {size} bytes (truncated or edited)")
    if limit is not None and found > limit:
        raise error(f"{path}: {found:,} bytes, more than the {limit:,} that {why} allows")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):      # replaced since the stat
                raise error(f"{path}: {file_kind(os.fstat(f.fileno()).st_mode)}, expected a regular file")
            data = f.read(found + 1)
    except FileNotFoundError:
        raise error(f"{path}: file missing ({incomplete})") from None
    except OSError as failure:
        raise error(f"{path}: cannot be read ({failure.strerror})") from None
    if len(data) != found:
        raise error(f"{path}: changed size while being read ({found} bytes, then {len(data)})")
    return data


def parse_json(path, data, error=ValueError):
    """The JSON in ``data`` (bytes read from ``path``), or ``error`` naming the file."""
    try:
        return json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as failure:
        raise error(f"{path}: not valid JSON, truncated or foreign ({failure})") from None


def parse_npz(path, data, error=ValueError):
    """{name: array} from the .npz in ``data``, loaded with allow_pickle=False, or ``error``."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            return {name: arrays[name] for name in arrays.files}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as failure:
        raise error(f"{path}: not a readable .npz file, truncated or foreign "
                    f"({type(failure).__name__}: {failure})") from None
