"""The ``npformer`` command: one sub-command per module, each with ``add_arguments`` and ``run``.

A user error (bad file, bad option) raises ``UsageError``: one line on stderr,
exit code 2, no traceback.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, function prefix, one-line help)
COMMANDS = {
    "tour": ("npformer.tour", "", "walk the tutorial's tiny decoder: every stage's shape and its attention"),
    "gradcheck": ("npformer.checks_cli", "", "check every component's backward by finite differences"),
    "examples": ("npformer.examples", "", "run the worked examples of the tutorial (all, or one by name)"),
    "demo": ("npformer.cli_train", "demo_", "train a small decoder on the built-in after-sales data and answer"),
    "train": ("npformer.cli_train", "train_", "train a decoder on built-in data or a UTF-8 text file"),
    "generate": ("npformer.cli_train", "generate_", "generate text from a checkpoint"),
    "exercises": ("npformer.cli_exercises", "exercises_", "write a workspace of exercises: the plain-track files to fill in"),
    "grade": ("npformer.cli_exercises", "grade_", "grade a workspace: not started, failing (and why) or done, per exercise"),
}


class UsageError(Exception):
    """A problem with the user's input, reported as one line and exit code 2."""


def _load(name):
    module_name, prefix, _ = COMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name == module_name:
            return None
        raise
    return getattr(module, prefix + "add_arguments"), getattr(module, prefix + "run")


def main(argv=None):
    """Parse ``argv`` and run one sub-command; returns the exit code."""
    parser = argparse.ArgumentParser(prog="npformer", description="A Transformer in NumPy, "
                                     "every backward written by hand and checked.")
    sub = parser.add_subparsers(dest="command", required=True)
    runners = {}
    for name, (_, _, help_text) in COMMANDS.items():
        loaded = _load(name)
        if loaded is None:
            continue
        add_arguments, run = loaded
        add_arguments(sub.add_parser(name, help=help_text, description=help_text))
        runners[name] = run
    args = parser.parse_args(argv)
    try:
        return runners[args.command](args) or 0
    except UsageError as error:
        print(f"npformer {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    # Run as ``python -m npformer.cli``: use the imported module, so that the
    # UsageError raised by sub-commands is the class this main() catches.
    from npformer.cli import main as package_main
    sys.exit(package_main())
