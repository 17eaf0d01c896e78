"""Two tracks, one switch: the plain maths you read and the fast kernels you run.

The concept files (t01_embedding.py ... t18_flash_attention.py) are the *plain track*:
forward written as the tutorial writes the maths, backward in the same plain style. A few
of their functions carry the decorator ``@fast_twin``; for each, ``npformer/fast/`` holds a
function of the same name and signature that computes the same numbers with speed idioms
(in-place and ``out=`` kernels, grouped GEMMs, row blocks on several cores). The tests hold
every pair equal: outputs and every gradient, to 1e-12 (relative) in float64 and 1e-5 in
float32.

The plain track runs unless a program asks for the other one, so a ``print`` added to a
plain function shows up. Which one runs is decided at call time:

    npformer.use_track("fast")             # from now on (in this thread), the fast twins
    with npformer.track("fast"):           # only inside the block
        ...
    NPFORMER_TRACK=fast python my_script.py

The choice is a context variable, like numpy's ``errstate`` or ``decimal``'s context: a
``with track(...)`` in one thread (or asyncio task) leaves every other thread on its own
track, and a new thread starts on the default. The twins share their cache records, so a
forward run on one track and its backward on the other agree.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import os

TRACKS = ("plain", "fast")
DEFAULT = "plain"
ENVIRONMENT = "NPFORMER_TRACK"

_FAST = {}                     # "npformer.t08_norm.layernorm_forward" -> its fast twin
_chosen = contextvars.ContextVar("npformer_track", default=None)


def check_track(name, where="track"):
    """``name`` if it is a track, else a ValueError naming ``where`` it came from."""
    if name not in TRACKS:
        raise ValueError(f"{where}: expected one of {', '.join(TRACKS)}, got {name!r}")
    return name


def default_track():
    """The track of a thread that chose none: ``NPFORMER_TRACK`` if set, else "plain"."""
    return check_track(os.environ.get(ENVIRONMENT, DEFAULT), ENVIRONMENT)


def current_track():
    """The track that runs now in this thread: "plain" or "fast"."""
    chosen = _chosen.get()
    return default_track() if chosen is None else chosen


def use_track(name):
    """Choose the track for what follows in this thread ("plain" or "fast"); returns the
    previous one."""
    previous = current_track()
    _chosen.set(check_track(name))
    return previous


@contextlib.contextmanager
def track(name):
    """Run the body of a ``with`` block on one track, then restore the previous one."""
    token = _chosen.set(check_track(name))
    try:
        yield name
    finally:
        _chosen.reset(token)


def _key(function):
    return f"{function.__module__}.{function.__qualname__}"


def fast_twin(plain):
    """Mark a plain function as having a drop-in twin in ``npformer/fast/``.

    The returned function runs ``plain`` itself on the plain track, and the twin on the
    fast track. ``.plain`` is the undecorated function.
    """
    key = _key(plain)

    @functools.wraps(plain)
    def dispatch(*args, **kwargs):
        if current_track() == "fast":
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
    """{qualified name of the plain function: (plain, fast)} for every pair ``npformer.fast``
    registered (``import npformer`` imports it)."""
    return {key: (fast.plain_twin, fast) for key, fast in _FAST.items()}
