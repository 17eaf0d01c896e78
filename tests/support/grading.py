"""Judging one exercise of a workspace as the grader does, for tests that read the raw result.

``judged(directory, exercise)`` runs it in a sandbox of its own (bubblewrap where this machine
has it) against the hand-out build of the test process, and returns the judge's reply:
{"result", "code", "output", "dropped", "stopped"}.
"""
import os
import tempfile

from npformer.exercises import catalog
from npformer.exercises.grader import copied, read_submission
from npformer.exercises.grading_build import shared_build
from npformer.exercises.learner_process import addresses_to_judge
from npformer.exercises.walls.bubblewrap import Limits
from npformer.exercises.session import judge_in
from npformer.exercises.walls.sandbox import Sandbox
from npformer.exercises.workspace import load_workspace


def judged(directory, name, timeout=120.0, examples="4", isolation=None):
    """The judge's reply for exercise ``name`` of the workspace in ``directory``."""
    workspace, exercise = load_workspace(directory), catalog.exercise_named(name)
    together = bool(exercise.builds_on)
    addresses = addresses_to_judge(workspace, exercise, together)
    os.environ["NPFORMER_GRADE_EXAMPLES"] = examples
    try:
        with tempfile.TemporaryDirectory() as folder, \
                Sandbox(copied(read_submission(workspace), os.path.join(folder, "files")), shared_build(),
                        isolation) as sandbox:
            return judge_in(sandbox, exercise, addresses, timeout, Limits(wall=2 * timeout + 20))
    finally:
        os.environ.pop("NPFORMER_GRADE_EXAMPLES")
