"""``npformer exercises``: hand out a workspace of exercises cut from the plain track.

    npformer exercises DIR [--start NAME | --only NAMES] [--forward] [--hints TIER] [--solutions]
                        [--course FILE [--points N] [--when-blocked POLICY]]
    npformer exercises --list
"""
from __future__ import annotations

import os
import sys

from ..exercises import EXERCISES, available, write_workspace
from .common import UsageError, check_output_dir, check_output_file


def names(text):
    """Exercise names from a comma- or space-separated option value."""
    return [name for name in (text or "").replace(",", " ").split() if name]


def add_arguments(parser):
    """Options of ``npformer exercises``."""
    parser.add_argument("directory", nargs="?", metavar="DIR",
                        help="the workspace to write (must not exist, or be empty)")
    parser.add_argument("--start", metavar="NAME", help="begin at this exercise (name or number)")
    parser.add_argument("--only", metavar="NAMES", help="just these exercises (comma-separated)")
    parser.add_argument("--forward", action="store_true", help="forward bodies to write too")
    parser.add_argument("--hints", choices=("none", "shapes", "formulas"), default="shapes",
                        help="shapes (default): docstrings with shapes and the forward line each "
                             "backward step undoes; formulas: the backward formulas too; none: "
                             "only the first line of each docstring")
    parser.add_argument("--solutions", action="store_true",
                        help="an answer key: the library's bodies instead of stubs (grades all done)")
    parser.add_argument("--course", metavar="FILE",
                        help="also write the teacher's course file (exercise list, points, what was "
                             "handed out) for `npformer grade SUBMISSIONS --course FILE`; keep it")
    parser.add_argument("--points", type=float, default=10.0,
                        help="points per exercise in the course file (default 10)")
    parser.add_argument("--when-blocked", choices=("no-points", "npformer-code"), default="no-points",
                        help="in the course file: what the training task earns while an exercise it "
                             "builds on fails: no points (the default), or graded with npformer's own "
                             "code in place of the failing exercises")
    parser.add_argument("--list", action="store_true", help="list the exercises and exit")


def list_exercises(forward=False, out=print):
    """Print every exercise: number, name, what it builds, where it is written."""
    offered = available(forward)
    width = max(len(e.label) for e in EXERCISES) + 1
    for e in EXERCISES:
        where = ", ".join(e.files(forward)) or ("-" if e in offered else "(with --forward)")
        out(f"{e.label:{width}} {e.title:58} {where}")


def run(args):
    """Run ``npformer exercises``."""
    if args.list:
        list_exercises(args.forward)
        return 0
    if args.directory is None:
        raise UsageError("DIR: expected the directory of the workspace to write (or --list)")
    check_output_dir("DIR", args.directory)
    if args.course is not None:
        check_output_file("--course", args.course)
    try:
        workspace = write_workspace(args.directory, args.start, names(args.only), args.forward,
                                    args.hints, args.solutions)
    except ValueError as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        print(f"npformer exercises: error: cannot write {args.directory} ({error.strerror or error})", file=sys.stderr)
        return 1
    if args.course:
        from ..exercises.course import write_course
        try:
            policy = {"no-points": "no points", "npformer-code": "graded with npformer's code"}[args.when_blocked]
            write_course(args.course, workspace, args.points, policy)
        except ValueError as error:
            raise UsageError(str(error)) from None
        except OSError as error:
            print(f"npformer exercises: error: cannot write {args.course} ({error.strerror or error})",
                  file=sys.stderr)
            return 1
    shown = os.path.relpath(workspace.directory)
    shown = workspace.directory if shown.startswith("..") else shown
    files, exercises = len(workspace.files), len(workspace.exercises)
    print(f"wrote {files} file{'s' * (files != 1)} for {exercises} exercise{'s' * (exercises != 1)} to {shown}; "
          f"read {os.path.join(shown, 'README.md')}, then grade with: npformer grade {shown}")
    return 0


