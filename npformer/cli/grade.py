"""``npformer grade``: grade a workspace written by ``npformer exercises``.

    npformer grade DIR [EXERCISE ...] [--timeout SECONDS] [--show-output]

Exits 0 when every graded exercise is done, 1 while one is not, 2 on a usage error (DIR
is not a workspace, an unknown exercise).
"""
from __future__ import annotations

import sys

from ..exercises import grade
from .common import UsageError


def add_arguments(parser):
    """Options of ``npformer grade``."""
    parser.add_argument("directory", metavar="DIR", help="a workspace written by `npformer exercises`")
    parser.add_argument("exercises", nargs="*", metavar="EXERCISE",
                        help="grade only these exercises (names or numbers); default: all")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds one exercise may run before it is stopped (default 120)")
    parser.add_argument("--show-output", action="store_true",
                        help="show what your code printed for passing exercises too (failing ones always)")


def run(args):
    """Run ``npformer grade``; 0 when every graded exercise is done, 1 otherwise."""
    try:
        outcomes = grade(args.directory, args.exercises, args.timeout, show_output=args.show_output)
    except ValueError as error:              # WorkspaceError too: not a workspace, unknown exercise
        raise UsageError(str(error).replace("timeout:", "--timeout:")) from None
    except OSError as error:
        print(f"npformer grade: error: {error}", file=sys.stderr)
        return 1
    return 0 if all(o.done for o in outcomes) else 1
