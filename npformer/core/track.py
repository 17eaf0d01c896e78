"""Two tracks, one switch: the plain maths you read and the fast kernels you run.

The component files (functional, linear, attention, norm, loss, optim ...) are the
*plain track*: forward and backward written the way the tutorial writes the maths.
A few of their functions carry the decorator ``@fast_twin``. For each of those,
``npformer/fast/`` holds a function of the same name and signature that computes
the same numbers with speed idioms (in-place and ``out=`` kernels, grouped GEMMs,
threads). The tests hold every pair equal: outputs and every gradient, to 1e-12
(relative) in float64 and 1e-5 in float32.

Which one runs is decided here, at call time:

    npformer.use_track("plain")            # from now on, everything runs the plain maths
    with npformer.track("plain"):          # only inside the block
        ...
    NPFORMER_TRACK=plain npformer demo     # from the shell (read when npformer is imported)

The default is "fast". A twin is looked up each call, so a forward run on one track
and its backward on the other still agree: the twins share their cache records.
"""
from __future__ import annotations

import contextlib
import functools
import os

TRACKS = ("fast", "plain")
DEFAULT = "fast"

_FAST = {}                     # "npformer.t08_norm.layernorm_forward" -> its fast twin


def _checked(name):
    if name not in TRACKS:
        raise ValueError(f"track: expected one of {TRACKS}, got {name!r}")
    return name


def _from_environment():
    name = os.environ.get("NPFORMER_TRACK", DEFAULT)
    if name not in TRACKS:
        raise ValueError(f"NPFORMER_TRACK: expected one of {TRACKS}, got {name!r}")
    return name


_current = _from_environment()


def current_track():
    """The track that runs now: "fast" or "plain"."""
    return _current


def use_track(name):
    """Choose the track for everything that follows ("fast" or "plain"); returns the previous one."""
    global _current
    previous, _current = _current, _checked(name)
    return previous


@contextlib.contextmanager
def track(name):
    """Run the body of a ``with`` block on one track, then restore the previous one."""
    previous = use_track(name)
    try:
        yield name
    finally:
        use_track(previous)


def _key(function):
    return f"{function.__module__}.{function.__qualname__}"


def fast_twin(plain):
    """Mark a plain function as having a drop-in twin in ``npformer/fast/``.

    The returned function runs the twin on the fast track and ``plain`` itself on the
    plain track (or when no twin is registered). ``.plain`` is the undecorated function.
    """
    key = _key(plain)

    @functools.wraps(plain)
    def dispatch(*args, **kwargs):
        if _current == "fast":
            twin = _FAST.get(key)
            if twin is not None:
                return twin(*args, **kwargs)
        return plain(*args, **kwargs)

    dispatch.plain = plain
    dispatch.twin_key = key
    return dispatch


def twin_of(dispatch):
    """Decorator for a fast function: register it as the twin of ``dispatch`` (a ``@fast_twin``)."""
    if not hasattr(dispatch, "twin_key"):
        raise TypeError(f"twin_of: {dispatch!r} is not marked @fast_twin")

    def register(fast):
        _FAST[dispatch.twin_key] = fast
        fast.plain_twin = dispatch.plain
        return fast
    return register


def twins():
    """{qualified name of the plain function: (plain, fast)} for every registered pair.

    Importing ``npformer`` registers them all (its ``__init__`` imports ``npformer.fast``).
    """
    return {key: (fast.plain_twin, fast) for key, fast in _FAST.items()}
