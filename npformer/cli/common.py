"""What every command shares: the usage error, option types that validate as they parse,
output that survives a closed pipe, and the checks run before any work starts."""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys


class UsageError(Exception):
    """A problem with the user's input: one line on stderr, exit code 2."""


# -- option types: argparse calls them on the text the user typed --------------------------
def _number(text, kind):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                         f"got {text!r}") from None


def positive_int(text):
    """An integer >= 1."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def count(text):
    """An integer >= 0."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def seed(text):
    """A seed for numpy's generators: an integer >= 0."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0 (numpy seeds cannot be "
                                         f"negative), got {value}")
    return value


def positive_number(text):
    """A finite number > 0."""
    value = _number(text, float)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return value


def temperature(text):
    """A finite number >= 0 (0: greedy)."""
    value = _number(text, float)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0 (0 = greedy), got {text}")
    return value


def probability(text):
    """A number in (0, 1]."""
    value = _number(text, float)
    if not 0 < value <= 1:              # also False for nan
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text}")
    return value


# -- output ---------------------------------------------------------------------------------
def silence_stdout():
    """Point stdout at the null device, so that writing to a closed pipe fails no more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):   # stdout is no real file (a test captures it)
        sys.stdout = open(os.devnull, "w")


def say(text=""):
    """Print a line; if the reader has gone (``| head``), keep working silently.

    Training uses it: a closed pipe should not cost the run.
    """
    try:
        print(text, flush=True)
    except BrokenPipeError:
        silence_stdout()


def warn(command, text):
    """One warning line on stderr."""
    print(f"npformer {command}: warning: {text}", file=sys.stderr)


# -- checks before any work ---------------------------------------------------------------
def check_output_dir(flag, path):
    """A UsageError unless ``path`` is, or can become, a directory we may write in."""
    if path is None:
        return
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{flag}: {path} exists and is not a directory")
    parent = os.path.abspath(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise UsageError(f"{flag}: cannot create {path}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{flag}: cannot write in {parent} (permission denied)")


def available_cores():
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@contextlib.contextmanager
def computing(command, args):
    """The track and the cores a command that trains computes on, said on its first line:
    the fast track unless ``--track plain``, on ``--threads`` cores."""
    from ..core.track import track
    from ..runtime.cores import limit_blas_threads
    threads = cap_threads(command, args.threads)
    cores = f"{threads} core{'s' * (threads != 1)}" if threads else "the cores BLAS is configured for"
    plain = " (the maths exactly as the tNN files write it: slower)" if args.track == "plain" else ""
    say(f"track: {args.track}, {cores}{plain}")
    with track(args.track), limit_blas_threads(threads):
        yield threads


def cap_threads(command, threads):
    """``threads`` limited to the cores there are, with a warning when it had to be."""
    cores = available_cores()
    if threads > cores:
        warn(command, f"--threads {threads} is more than the {cores} cores here; using {cores} "
                      f"(more threads than cores make every step wait)")
        return cores
    return threads


def check_plot_dir(path):
    """Fail before training (not after) when --plot cannot work."""
    if path is None:
        return
    from .plot import PlotUnavailable, require_matplotlib
    try:
        require_matplotlib()
    except PlotUnavailable as error:
        raise UsageError(str(error)) from None
    check_output_dir("--plot", path)
