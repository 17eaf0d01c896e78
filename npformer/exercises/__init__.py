"""Teach with npformer: exercises cut from the plain track, and a grader that explains mistakes.

    write_workspace("ws")            # the plain-track files with their backward bodies to write
    grade("ws")                      # each exercise: not started, failing (and why) or done

The exercises follow the tutorial (``catalog.EXERCISES``); each is graded in its own
process against a copy of npformer holding the learner's files (``grader``), by the
gradient-check cases and finite differences, a comparison with the reference gradient
that names the usual mistakes (``compare``), and the claims the tutorial makes
(``claims``). The last exercise trains the reverse task with the learner's components.
"""
from .catalog import EXERCISES, available, exercise_named, select  # noqa: F401
from .grader import Outcome, grade  # noqa: F401
from .workspace import Workspace, WorkspaceError, load_workspace, write_workspace  # noqa: F401
