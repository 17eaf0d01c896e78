"""The ``npformer`` command's entry point, a module outside the package on purpose.

The console script imports this module and calls ``program()``. Importing npformer takes a
second or more (NumPy, SciPy, every concept file), and every module inside the package imports
the package first: a Ctrl-C in that second, before any code of npformer's could catch it, ended
in a KeyboardInterrupt traceback. This module imports nothing of npformer's until ``program()``
runs, inside a ``try``. ``python -m npformer`` imports the package before its ``__main__`` runs,
so it keeps that second unguarded.
"""
import signal
import sys


def program():
    """Import the command line and run it; a Ctrl-C at any moment ends with one line and 130."""
    try:
        from npformer.cli import program as command_line
        return command_line()
    except KeyboardInterrupt:
        named = sys.argv[1:2] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else []
        print(f"{' '.join(['npformer', *named])}: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
