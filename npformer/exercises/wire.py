"""What crosses between the grader's judge and the learner's process: arrays, never objects.

A message is a tree of JSON values (None, bools, numbers, strings, lists, dicts with string
keys) and arrays of numbers; tuples, lists and dicts are tagged so that they come back as
they went. On the pipe a message is one frame::

    b"NPF1" | total length (8 bytes) | header length (8 bytes) | header JSON | arrays

each array as its dtype and shape (8 bytes of length, then JSON: ``["<f8", [2, 3]]``) and its
bytes in C order (8 bytes of length, then the bytes). Reading never unpickles: only booleans,
integers, floats and complex numbers of the sizes NumPy has are accepted, and the bytes must
be exactly the array's size; a frame past ``MAX_FRAME`` bytes, or one that does not parse, is a
``ChannelError`` (the learner's code wrote to the channel, or the message is not ours).
"""
from __future__ import annotations

import builtins
import json
import math
import os
import re
import struct

import numpy as np

MAGIC = b"NPF1"
MAX_FRAME = 64 << 20             # bytes of one message: a drawn example is a few KiB
MAX_HEADER = 4 << 20
MAX_DEPTH = 32
KINDS = "biufc"                  # numpy dtype kinds an array may have
DTYPE = re.compile(r"[<>|=][biufc](1|2|4|8|16)")    # their dtype.str: byte order, kind, bytes
_LENGTH = struct.Struct("<Q")


class ChannelError(Exception):
    """A frame that is not a message of the grader's protocol (its text says what is wrong)."""


# -- values to a frame ------------------------------------------------------------------------
def _encode(value, arrays, depth=0):
    if depth > MAX_DEPTH:
        raise TypeError("a value nested too deeply to send")
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in KINDS or value.dtype.fields is not None:
            raise TypeError(f"an array of dtype {value.dtype}, not of numbers")
        arrays.append(value)
        return {"$a": len(arrays) - 1}
    if isinstance(value, np.generic):
        arrays.append(np.asarray(value))
        return {"$s": len(arrays) - 1}
    if kind is tuple:
        return {"$t": [_encode(v, arrays, depth + 1) for v in value]}
    if kind is list:
        return {"$l": [_encode(v, arrays, depth + 1) for v in value]}
    if kind is dict:
        if not all(type(k) is str for k in value):
            raise TypeError("a dict whose keys are not all strings")
        return {"$d": {k: _encode(v, arrays, depth + 1) for k, v in value.items()}}
    raise TypeError(f"a {kind.__name__}, which is not an array, a number or a string")


def pack(message):
    """The frame (bytes) of ``message``; TypeError naming what cannot be sent."""
    arrays = []
    header = json.dumps(_encode(message, arrays)).encode("utf-8")
    parts = [_LENGTH.pack(len(header)), header]
    for array in arrays:
        meta = json.dumps([array.dtype.str, list(array.shape)]).encode("ascii")
        data = array.tobytes(order="C")
        parts += [_LENGTH.pack(len(meta)), meta, _LENGTH.pack(len(data)), data]
    body = b"".join(parts)
    if len(body) > MAX_FRAME:
        raise TypeError(f"a message of {len(body):,} bytes, past the limit of {MAX_FRAME:,}")
    return MAGIC + _LENGTH.pack(len(body)) + body


# -- a frame to values ------------------------------------------------------------------------
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


def unpack(body):
    """The message of a frame's body (bytes after the length); ChannelError if it is not one."""
    view, at = memoryview(body), 0

    def take(n):
        nonlocal at
        if n < 0 or at + n > len(view):
            raise ChannelError("a frame shorter than its lengths say")
        piece = view[at:at + n]
        at += n
        return piece
    size = _LENGTH.unpack(take(8))[0]
    if size > MAX_HEADER:
        raise ChannelError(f"a header of {size:,} bytes")
    try:
        header = json.loads(bytes(take(size)).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ChannelError(f"a header that is not JSON ({error})") from None
    arrays = []
    while at < len(view):
        meta = take(_LENGTH.unpack(take(8))[0])
        data = take(_LENGTH.unpack(take(8))[0])
        arrays.append(_array_of(meta, data))
    return _decode(header, arrays)


def _array_of(meta, data):
    """The array whose dtype and shape are ``meta`` (JSON) and whose C-order bytes are ``data``;
    ChannelError unless it is an array of numbers whose bytes are exactly its size."""
    try:
        dtype, shape = json.loads(bytes(meta).decode("ascii"))
    except (UnicodeDecodeError, ValueError, TypeError):
        raise ChannelError("an array whose dtype and shape do not parse") from None
    if type(dtype) is not str or not DTYPE.fullmatch(dtype) or type(shape) is not list or \
            len(shape) > MAX_DEPTH or not all(type(n) is int and n >= 0 for n in shape):
        raise ChannelError("an array that is not of numbers")
    dtype = np.dtype(dtype)
    if dtype.kind not in KINDS or dtype.itemsize * math.prod(shape) != len(data):
        raise ChannelError("an array that is not of numbers, or not of its size")
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def send(fd, message):
    """Write ``message``'s frame to the file descriptor ``fd``, all of it."""
    data = memoryview(pack(message))
    while data:
        data = data[os.write(fd, data):]


def _read_exactly(fd, n):
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left = left - len(chunk)
    return b"".join(chunks)


def receive(fd):
    """The next message from ``fd``; None at end of file before a frame begins; ChannelError
    for a frame that is not ours (wrong magic, too long, cut short, or not parsing)."""
    head = _read_exactly(fd, len(MAGIC) + 8)
    if head is None:
        return None
    if head[:len(MAGIC)] != MAGIC:
        raise ChannelError("a frame that does not begin as the grader's do")
    size = _LENGTH.unpack(head[len(MAGIC):])[0]
    if size > MAX_FRAME:
        raise ChannelError(f"a frame of {size:,} bytes, past the limit of {MAX_FRAME:,}")
    body = _read_exactly(fd, size)
    if body is None:
        raise ChannelError("a frame cut short")
    return unpack(body)


# -- errors -----------------------------------------------------------------------------------
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
    elif module.split(".")[0] == "numpy":
        found = np
        for part in module.split(".")[1:] + [name]:
            found = getattr(found, part, None)
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
