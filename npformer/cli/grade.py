"""``npformer grade``: grade a workspace written by ``npformer exercises``, or a whole class.

    npformer grade DIR [EXERCISE ...] [--timeout SECONDS] [--show-output] [--memory GIB]
    npformer grade SUBMISSIONS [...] --course COURSE.json --out GRADEBOOK [--jobs N]
                   [--gradescope] [--junit] [--without-isolation]

The first line says which walls are in force (bubblewrap's namespaces and seccomp, or none).
One workspace: exits 0 when every graded exercise is done, 1 while one is not. With
``--course`` (the teacher's file written by ``npformer exercises --course``): every
submission folder (or each workspace given) is graded by the course, ``--jobs`` at a time
(default: every core), into a gradebook; exits 0 once it is written. Grading a class needs
bubblewrap unless ``--without-isolation`` is given. 2 on a usage error.
"""
from __future__ import annotations

import os
import sys

from ..exercises import grade
from ..exercises.grader import DEFAULT_TIMEOUT
from ..exercises.walls.bubblewrap import GIB, Limits, detect, private
from .common import UsageError, check_input_file, check_output_dir

# A course file lists exercises, points and a few hashes: kilobytes. More is not one.
COURSE_LIMIT = 16 * 2 ** 20


def add_arguments(parser):
    """Options of ``npformer grade``."""
    parser.add_argument("directory", metavar="DIR", help="a workspace written by `npformer exercises`; "
                        "with --course: a folder of submissions, or a workspace")
    parser.add_argument("exercises", nargs="*", metavar="EXERCISE",
                        help="grade only these exercises (names or numbers); default: all. With "
                             "--course: more submission folders or workspaces")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds one exercise may run before it is stopped (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--show-output", action="store_true",
                        help="show what your code printed for passing exercises too (failing ones always)")
    parser.add_argument("--memory", type=float, default=4.0,
                        help="GiB of address space one graded process may use (default 4)")
    parser.add_argument("--course", metavar="FILE", help="the teacher's course file: grade a class")
    parser.add_argument("--out", metavar="GRADEBOOK", help="with --course: the folder of the gradebook")
    parser.add_argument("--jobs", type=int, default=None,
                        help="with --course: submissions graded at once (default: the number of cores)")
    parser.add_argument("--gradescope", action="store_true", help="with --course: Gradescope's results.json too")
    parser.add_argument("--junit", action="store_true", help="with --course: JUnit XML too (junit.xml)")
    parser.add_argument("--without-isolation", action="store_true",
                        help="with --course: grade even where bubblewrap cannot wall the code in "
                             "(every row then says so)")


def _limits(args):
    if not args.memory > 0:
        raise UsageError(f"--memory: expected a positive number of GiB, got {args.memory:g}")
    return Limits(memory=int(args.memory * GIB), cpu=max(10.0, 2 * args.timeout))


def run(args):
    """Run ``npformer grade``; 0 when every graded exercise is done (or the gradebook is written)."""
    # before any learner's process starts: none of them may read this process's memory
    private()
    if not args.directory:
        raise UsageError("DIR: expected a workspace directory, got an empty path ''")
    if args.course is not None and (not args.course or os.path.lexists(args.course)):
        # a device, a FIFO or a huge file is refused before it is opened (a missing one is
        # load_course's to report)
        check_input_file("--course", args.course, COURSE_LIMIT, what="a course file (JSON)")
    if args.course:
        return run_class(args)
    for name in ("out", "jobs"):
        if getattr(args, name) is not None:
            raise UsageError(f"--{name}: only with --course (grading a class)")
    if args.gradescope or args.junit or args.without_isolation:
        raise UsageError("--gradescope, --junit, --without-isolation: only with --course (grading a class)")
    try:
        outcomes = grade(args.directory, args.exercises, args.timeout, show_output=args.show_output,
                         limits=_limits(args))
    except ValueError as error:              # WorkspaceError too: not a workspace, unknown exercise
        raise UsageError(str(error).replace("timeout:", "--timeout:")) from None
    except OSError as error:
        print(f"npformer grade: error: {error}", file=sys.stderr)
        return 1
    return 0 if all(o.done for o in outcomes) else 1


def run_class(args):
    """Grade every submission by the course; write the gradebook; print one line each."""
    from ..exercises.course import load_course
    from ..exercises.gradebook import IsolationMissing, grade_class, summary
    if not args.out:
        raise UsageError("--out: expected the folder to write the gradebook to (with --course)")
    check_output_dir("--out", args.out)
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs: expected a whole number >= 1, got {args.jobs}")
    if not (args.timeout > 0):
        raise UsageError(f"--timeout: expected a positive number of seconds, got {args.timeout:g}")
    try:
        course = load_course(args.course)
        print(detect().line(), file=sys.stderr, flush=True)
        books = grade_class([args.directory] + list(args.exercises), course, args.out, args.jobs,
                            args.timeout, _limits(args), args.gradescope, args.junit,
                            without_isolation=args.without_isolation)
    except IsolationMissing as error:
        print(f"npformer grade: error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        print(f"npformer grade: error: {error}", file=sys.stderr)
        return 1
    for line in summary(books):
        print(line)                          # the names in them are made safe to show already
    print(f"gradebook: {os.path.join(args.out, 'gradebook.csv')}")
    return 0
