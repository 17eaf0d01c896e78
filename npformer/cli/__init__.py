"""The ``npformer`` command: one module per sub-command, listed in ``COMMANDS``.

Each command module has ``add_arguments(parser)`` and ``run(args) -> exit code``;
``main`` turns every way a command can end into an exit code (``EXIT_CODES``).
Errors are one line on stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import NamedTuple

from . import conform, demo, examples, exercises, generate, grade, gradcheck, tour, train
from .. import __version__
from ..core.track import default_track
from ..testing.needs import MissingExtra
from .common import UsageError, silence_stdout

__all__ = ["COMMANDS", "UsageError", "main", "program"]

EXIT_CODES = """exit codes:
  0     done
  1     a failure while working: a full disk, too little memory, a diverged run
  2     a problem with the input (an option, a file, a checkpoint), or an optional package
        the command needs is not installed (the message names it)
  130   Ctrl-C; 143 SIGTERM; 129 SIGHUP (128 + the signal's number); train and demo
        first finish the step and save a checkpoint
  141   the reader of the output went away (npformer ... | head)
errors are one line on stderr; NPFORMER_DEBUG=1 shows the traceback of an unexpected one"""


class Command(NamedTuple):
    """One sub-command: its module (``add_arguments``, ``run``) and a one-line help."""

    module: object
    help: str


COMMANDS = {
    "tour": Command(tour, "walk the tutorial's tiny decoder: every stage's shape and its attention"),
    "gradcheck": Command(gradcheck, "check every component's backward by finite differences"),
    "examples": Command(examples, "run the worked examples of the tutorial (all, or one by name)"),
    "demo": Command(demo, "train a small decoder on the built-in after-sales data and answer"),
    "train": Command(train, "train a decoder on built-in data or a UTF-8 text file"),
    "generate": Command(generate, "generate text from a checkpoint"),
    "exercises": Command(exercises, "write a workspace of exercises: the plain-track files to fill in"),
    "grade": Command(grade, "grade a workspace: not started, failing (and why) or done, per exercise"),
    "conform": Command(conform, "check your own function against npformer's component (properties, gradients)"),
}


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line (no usage block) and no exit from inside."""

    def error(self, message):
        raise UsageError(f"{self.prog}: error: {message} (see {self.prog} --help)")


class _Stopped(BaseException):
    """SIGTERM or SIGHUP outside training: end quietly."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


class _StopRecord:
    """Ctrl-C, SIGTERM and SIGHUP outside training: raise, and raise again if it was dropped.

    Python drops an exception raised where nothing can receive it (a garbage-collector
    callback, a ``__del__``) and hands it to ``sys.unraisablehook``: a Ctrl-C that lands
    there would be lost and the command would carry on. The hook here sees it go and raises
    it again a moment later, from ordinary code, through SIGALRM. A signal the process was
    started with ignored (``nohup``, a background job) stays ignored."""

    NAMES = ("SIGINT", "SIGTERM", "SIGHUP")

    def __init__(self):
        self.received = None
        self.previous = {}
        self.previous_hook = None

    def __enter__(self):
        try:
            for name in self.NAMES:
                number = getattr(signal, name, None)
                if number is not None and signal.getsignal(number) != signal.SIG_IGN:
                    self.previous[number] = signal.signal(number, self._raise)
            if hasattr(signal, "SIGALRM"):
                self.previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, self._raise_again)
        except ValueError:                     # not the main thread: signals stay as they are
            return self
        self.previous_hook, sys.unraisablehook = sys.unraisablehook, self._dropped
        return self

    def _raise(self, signum, frame):
        self.received = signum
        self._raise_again(signum, frame)

    def _raise_again(self, signum, frame):
        if self.received == signal.SIGINT:
            raise KeyboardInterrupt
        if self.received is not None:
            raise _Stopped(self.received)

    def _dropped(self, unraisable):
        if (self.received is not None and getattr(signal, "SIGALRM", None) in self.previous
                and issubclass(unraisable.exc_type, (KeyboardInterrupt, _Stopped))):
            signal.setitimer(signal.ITIMER_REAL, 0.01)
        else:
            self.previous_hook(unraisable)

    def __exit__(self, *exc):
        if self.previous_hook is not None:
            sys.unraisablehook = self.previous_hook
        if getattr(signal, "SIGALRM", None) in self.previous:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for number, handler in self.previous.items():
            signal.signal(number, handler)
        return False


def _parser():
    parser = _Parser(prog="npformer", description="A Transformer in NumPy, every backward "
                     "written by hand and checked.", epilog=EXIT_CODES,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"npformer {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.module.add_arguments(sub.add_parser(name, help=command.help, description=command.help))
    return parser


TRAINING_COMMANDS = ("demo", "train")


def program():
    """The ``npformer`` program (``python -m npformer``, and the console script through
    ``npformer_command.program``, which guards the imports against Ctrl-C): the settings of
    the whole process a training command wants, made here at the entry point and never by
    ``main`` (which tests call in-process), then ``main``."""
    if len(sys.argv) > 1 and sys.argv[1] in TRAINING_COMMANDS:
        from ..runtime.memory import keep_freed_memory
        keep_freed_memory()                    # this process only trains: reuse freed arrays
    return main()


def main(argv=None):
    """Parse ``argv`` (default: the command line) and run one sub-command; returns the exit code."""
    try:
        # argparse reports arguments no sub-command took as the top parser's ("npformer:
        # error"); they are reported here as the sub-command's, which names its own options
        args, extra = _parser().parse_known_args(argv)
        if extra:
            raise UsageError(f"npformer {args.command}: error: unrecognized arguments: "
                             f"{' '.join(extra)} (see npformer {args.command} --help)")
        default_track()                        # a mistyped NPFORMER_TRACK: one line, before any work
    except UsageError as error:
        print(error, file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"npformer {args.command}: error: {error}", file=sys.stderr)
        return 2
    except SystemExit as finished:             # --help and --version print, then end here
        return finished.code or 0
    name = f"npformer {args.command}"
    with _StopRecord() as signals:
        code = _run(args, name)
    if signals.received is not None and code != 128 + signals.received:
        code = _stopped(name, signals.received)   # its exception was dropped where it was raised
    try:
        sys.stdout.flush()     # on a pipe, output waits in the buffer: the reader may be gone only now
    except BrokenPipeError:
        silence_stdout()
        return 128 + 13
    return code


def _stopped(name, signum):
    said = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
    print(f"{name}: {said}", file=sys.stderr)
    return 128 + signum


def _run(args, name):
    def fail(message, code):
        print(f"{name}: {message}", file=sys.stderr)
        return code
    try:
        return COMMANDS[args.command].module.run(args) or 0
    except (UsageError, MissingExtra) as error:      # MissingExtra: nothing ran yet, as for bad input
        return fail(f"error: {error}", 2)
    except KeyboardInterrupt:
        return _stopped(name, signal.SIGINT)
    except _Stopped as stop:
        return _stopped(name, stop.signum)
    except BrokenPipeError:
        silence_stdout()
        return 128 + 13                        # as if killed by SIGPIPE, like other tools
    except MemoryError:
        return fail("error: not enough memory (choose smaller sizes)", 1)
    except Exception as error:                 # noqa: BLE001 - one line, never a traceback
        if os.environ.get("NPFORMER_DEBUG"):
            raise
        if isinstance(error, (OSError, RuntimeError, ImportError)):   # ImportError: says what to install
            return fail(f"error: {error}", 1)
        return fail(f"error: {type(error).__name__}: {error} (NPFORMER_DEBUG=1 shows the "
                    f"traceback)", 1)
