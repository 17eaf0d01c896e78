"""What crosses between the judge and the learner's process: arrays and plain values, never objects.

A message is a tree of JSON values (None, bools, numbers, strings, lists, dicts with string
keys) and arrays of numbers; tuples, lists and dicts are tagged so that they come back as they
went. On the pipe a message is its length (8 bytes), the length of its JSON header (8 bytes),
the header, then each array in NumPy's own ``.npy`` format. Reading never unpickles: an array's
``.npy`` header is read first (``numpy.lib.format``), and only booleans, integers, floats and
complex numbers whose bytes fit in what the message still holds are read. Anything else (a
message past ``MAX_MESSAGE``, a header that is not JSON or nests too deeply, an array of
objects) is a ``ChannelError``: whatever sent it is not speaking the grader's protocol.
"""
from __future__ import annotations

import builtins
import io
import json
import os
import select
import struct
import sys
import time

import numpy as np
from numpy.lib import format as npy

MAX_MESSAGE = 64 << 20           # bytes of one message: a drawn example is a few KiB
MAX_DEPTH = 32
KINDS = "biufc"                  # numpy dtype kinds an array may have
_LENGTH = struct.Struct("<Q")


class ChannelError(Exception):
    """A message that is not one of the grader's protocol (its text says what is wrong)."""


class Late(Exception):
    """The other side did not read or answer before the deadline."""


# -- values to bytes ---------------------------------------------------------------------------
def _encode(value, arrays, depth=0):
    if depth > MAX_DEPTH:
        raise TypeError("a value nested too deeply to send")
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.kind not in KINDS or array.dtype.fields is not None:
            raise TypeError(f"an array of dtype {array.dtype}, not of numbers")
        arrays.append(array)
        return {"$a" if isinstance(value, np.ndarray) else "$s": len(arrays) - 1}
    if kind in (tuple, list):
        return {"$t" if kind is tuple else "$l": [_encode(v, arrays, depth + 1) for v in value]}
    if kind is dict:
        if not all(type(k) is str for k in value):
            raise TypeError("a dict whose keys are not all strings")
        return {"$d": {k: _encode(v, arrays, depth + 1) for k, v in value.items()}}
    raise TypeError(f"a {kind.__name__}, which is not an array, a number or a string")


def pack(message):
    """The bytes of ``message`` on the pipe; TypeError naming what cannot be sent."""
    arrays = []
    header = json.dumps(_encode(message, arrays)).encode("utf-8")
    body = io.BytesIO()
    body.write(_LENGTH.pack(len(header)) + header)
    for array in arrays:
        npy.write_array(body, array, allow_pickle=False)
    data = body.getvalue()
    if len(data) > MAX_MESSAGE:
        raise TypeError(f"a message of {len(data):,} bytes, past the limit of {MAX_MESSAGE:,}")
    return _LENGTH.pack(len(data)) + data


# -- bytes to values ---------------------------------------------------------------------------
def _decode(node, arrays, depth=0):
    if depth > MAX_DEPTH:
        raise ChannelError("a message nested too deeply")
    if node is None or type(node) in (bool, int, float, str):
        return node
    if type(node) is not dict or len(node) != 1:
        raise ChannelError("a value that is not tagged")
    (tag, inner), = node.items()
    if tag in ("$a", "$s"):
        if type(inner) is not int or not 0 <= inner < len(arrays):
            raise ChannelError("an array reference out of range")
        return arrays[inner] if tag == "$a" else arrays[inner][()]
    if tag in ("$t", "$l") and type(inner) is list:
        items = [_decode(v, arrays, depth + 1) for v in inner]
        return tuple(items) if tag == "$t" else items
    if tag == "$d" and type(inner) is dict:
        return {k: _decode(v, arrays, depth + 1) for k, v in inner.items()}
    raise ChannelError(f"an unknown tag {tag!r}")


def _read_array(stream, left):
    """The next ``.npy`` array of ``stream``, whose data may take at most ``left`` bytes."""
    try:
        version = npy.read_magic(stream)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"version {version}")
        read_header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
        shape, fortran, dtype = read_header(stream)
    except (ValueError, SyntaxError, TypeError) as error:
        raise ChannelError(f"an array whose .npy header does not parse ({error})") from None
    if dtype.kind not in KINDS or dtype.fields is not None or dtype.hasobject or len(shape) > MAX_DEPTH \
            or any(n < 0 for n in shape):
        raise ChannelError("an array that is not of numbers")
    size = dtype.itemsize * int(np.prod(shape, dtype=object))
    if size > left:
        raise ChannelError("an array larger than the message that holds it")
    data = stream.read(size)
    if len(data) != size:
        raise ChannelError("an array cut short")
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()


def unpack(body):
    """The message in ``body`` (the bytes after its length); ChannelError if it is not one."""
    stream = io.BytesIO(body)
    head = stream.read(_LENGTH.size)
    if len(head) != _LENGTH.size:
        raise ChannelError("a message shorter than its lengths say")
    size = _LENGTH.unpack(head)[0]
    if size > len(body):
        raise ChannelError("a message shorter than its lengths say")
    try:
        header = json.loads(stream.read(size).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ChannelError(f"a header that is not JSON the grader reads ({type(error).__name__})") from None
    arrays = []
    while stream.tell() < len(body):
        arrays.append(_read_array(stream, len(body) - stream.tell()))
    return _decode(header, arrays)


def _wait(fd, event, deadline):
    """Block until ``fd`` is ready for ``event`` (select.POLLIN or POLLOUT); Late when the
    monotonic ``deadline`` passes first (None: no deadline, for the learner's own side)."""
    if deadline is None:
        return
    poll = select.poll()
    poll.register(fd, event)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Late()
        if poll.poll(left * 1000):
            return


def send(fd, message, deadline=None):
    """Write ``message`` to the file descriptor ``fd``, all of it, before ``deadline``."""
    data = memoryview(pack(message))
    if deadline is not None:
        os.set_blocking(fd, False)             # a reader that stops reading cannot hold us
    while data:
        _wait(fd, select.POLLOUT, deadline)
        try:
            data = data[os.write(fd, data):]
        except BlockingIOError:
            continue


def _read_exactly(fd, n, deadline):
    chunks, left = [], n
    while left:
        _wait(fd, select.POLLIN, deadline)
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left = left - len(chunk)
    return b"".join(chunks)


def receive(fd, deadline=None):
    """The next message from ``fd``; None at the end of the pipe before a message begins;
    ChannelError for one that is not the grader's (too long, cut short, not parsing); Late
    when it has not all come by the monotonic ``deadline``."""
    head = _read_exactly(fd, _LENGTH.size, deadline)
    if head is None:
        return None
    size = _LENGTH.unpack(head)[0]
    if size > MAX_MESSAGE:
        raise ChannelError(f"a message of {size:,} bytes, past the limit of {MAX_MESSAGE:,}")
    body = _read_exactly(fd, size, deadline)
    if body is None:
        raise ChannelError("a message cut short")
    return unpack(body)


# -- errors ------------------------------------------------------------------------------------
def error_message(error, described):
    """An exception as a message: its type's name, its arguments when they are plain, its text
    and ``described`` (the one-line account with the learner's file and line)."""
    args = list(error.args) if all(type(a) in (str, int, float, bool) or a is None for a in error.args) \
        else None
    return {"type": type(error).__name__, "module": type(error).__module__, "args": args,
            "text": str(error)[:2000], "described": str(described)[:2000]}


class LearnerError(Exception):
    """An exception of a type the judge does not rebuild (the learner's own, or a library's)."""

    text = ""

    def __str__(self):
        return self.text


_KINDS_SEEN = {}


def rebuilt(message):
    """An exception equal to the one the learner's process raised: the same builtin type (or
    numpy's) and text, so that ``same_error`` compares it with a catalogued mistake's; other
    types become one ``LearnerError`` subclass per name. ``described`` is kept on it for
    ``describe_error``. Never an exception class of npformer's: the judge's own signals (a
    check out of scope, a property failing) are not the learner's to raise."""
    if type(message) is not dict or not all(type(message.get(k)) is str
                                            for k in ("type", "module", "text", "described")):
        raise ChannelError("an error that is not described as the grader's are")
    name, module, text, args = message["type"], message["module"], message["text"], message.get("args")
    found = None
    if module == "builtins":
        found = getattr(builtins, name, None)
    elif module.split(".")[0] == "numpy" and module in sys.modules:     # looked up, never imported
        found = getattr(sys.modules[module], name, None)
    error = None
    if isinstance(found, type) and issubclass(found, Exception) and type(args) is list:
        try:
            error = found(*args)
        except Exception:                     # noqa: BLE001 - a constructor of its own: rebuilt below
            error = None
        if error is not None and str(error) != text:
            error = None
    if error is None:
        kind = _KINDS_SEEN.get(name)
        if kind is None:
            kind = _KINDS_SEEN[name] = type(name if name.isidentifier() else "LearnerError", (LearnerError,), {})
        error = kind()
        error.text = text
    error.described = message["described"]
    return error
