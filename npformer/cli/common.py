"""What every command shares: the usage error, option types that validate as they parse,
output that survives a closed pipe, and the checks run before any work starts."""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import stat
import sys
import tempfile


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


def non_negative_int(text):
    """An integer >= 0."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


MAX_STEPS = 10_000_000


def steps(text):
    """A number of optimizer steps: an integer from 1 to ``MAX_STEPS``, in digits or as a whole
    number in e-notation (``1e4``). A run keeps three numbers a step, in memory and in every
    checkpoint (64 bytes as JSON: 640 MB at the bound), and ten million steps of even a tiny
    model take days on a CPU; a step count past that is a typing mistake, said as one."""
    try:
        value = int(text)
    except ValueError:
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not (math.isfinite(number) and number.is_integer()):
            raise argparse.ArgumentTypeError(f"expected a whole number of steps, got {text!r}") from None
        value = int(number)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    if value > MAX_STEPS:
        raise argparse.ArgumentTypeError(
            f"expected at most {MAX_STEPS:,} steps (days of training on a CPU; the run keeps three "
            f"numbers a step in memory and in every checkpoint), got {text}")
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
    """A UsageError unless ``path`` is, or can become, a directory we may write in.

    What the system refuses only when asked (a read-only or virtual file system such as
    /proc, a full quota) is found by asking: a folder is made inside ``path`` (and ``path``
    itself first when it is new), then removed, so nothing is left behind.
    """
    if path is None:
        return
    if not path:
        raise UsageError(f"{flag}: expected a directory, got an empty path ''")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{flag}: {path} exists and is not a directory")
    parent = os.path.abspath(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise UsageError(f"{flag}: cannot create {path}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{flag}: cannot write in {parent} (permission denied)")
    made = []
    try:
        missing = []
        folder = os.path.abspath(path)
        while folder != parent:
            missing.append(folder)
            folder = os.path.dirname(folder)
        for folder in reversed(missing):
            os.mkdir(folder)
            made.append(folder)
        made.append(tempfile.mkdtemp(prefix=".npformer-probe-", dir=path))
    except OSError as error:
        verb = f"cannot create {path}" if missing else f"cannot write in {path}"
        raise UsageError(f"{flag}: {verb} ({error.strerror or error})") from None
    finally:
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(folder)


def check_input_file(flag, path, limit, what="a regular file", too_big=""):
    """A UsageError naming ``flag`` unless ``path`` is a regular file of at most ``limit``
    bytes: a device (/dev/zero), a FIFO, a socket or a directory is refused before it is
    opened, so reading it can neither hang nor fill the memory. ``too_big``: what to say
    after the limit (why it is there, what to do)."""
    from ..checkpoints.budget import human
    from ..core.fileio import file_kind
    if not path:
        raise UsageError(f"{flag}: expected {what}, got an empty path ''")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UsageError(f"{flag}: file {path} does not exist") from None
    except OSError as error:
        raise UsageError(f"{flag}: cannot read {path} ({error.strerror or error})") from None
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{flag}: {path} is {file_kind(info.st_mode)}, expected {what}")
    if info.st_size > limit:
        raise UsageError(f"{flag}: {path} holds {human(info.st_size)}, more than the "
                         f"{human(limit)} npformer reads from one{too_big}")
    return info.st_size


def read_input_file(flag, path, limit, what="a regular file", too_big=""):
    """The bytes of the file ``path`` given to ``flag``, checked as ``check_input_file`` checks
    (and read no further than the size it had then)."""
    from ..core.fileio import read_bytes
    check_input_file(flag, path, limit, what, too_big)
    try:
        return read_bytes(path, limit=limit, why=f"{flag} allows")
    except ValueError as error:
        raise UsageError(f"{flag}: {error}") from None


def check_output_file(flag, path):
    """A UsageError unless ``path`` names a file npformer may write: new, or a regular file,
    in a directory that exists (a device or a pipe is never written through)."""
    from ..core.fileio import file_kind
    if not path:
        raise UsageError(f"{flag}: expected a file to write, got an empty path ''")
    if os.path.lexists(path) and not os.path.islink(path):
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise UsageError(f"{flag}: {path} is {file_kind(mode)}, expected a regular file to write")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{flag}: cannot write {path}: the folder {folder} does not exist")


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


def check_plot_dir(path, command=None):
    """Fail before any work (not after) when --plot cannot work. The section pictures
    (``command`` None: examples, tour) are labelled in Chinese and need a CJK font; the
    training pictures (``command`` "train" or "demo") number the positions without one,
    and a warning says so."""
    if path is None:
        return
    if not path:
        raise UsageError("--plot: expected a directory, got an empty path ''")
    from ..pictures.plot import PlotUnavailable, require_cjk_font, require_matplotlib
    try:
        require_matplotlib()
        require_cjk_font()
    except PlotUnavailable as error:
        if command is None or "matplotlib" in str(error):
            raise UsageError(str(error) if str(error).startswith("--plot") else f"--plot: {error}") from None
        warn(command, f"--plot: {error}; the attention maps number the positions instead")
    check_output_dir("--plot", path)
