"""The README a workspace opens with: the exercises in order, what each builds on, how to grade."""
from __future__ import annotations

from . import catalog


def _written_by(workspace):
    parts = ["backward bodies" + (" and forward bodies" if workspace.forward else "")]
    parts.append("formulas shown in the module docstrings" if workspace.hints
                 else "formulas hidden (--no-hints)")
    return ", ".join(parts)


def _functions(exercise, forward):
    names = [spec.split(":")[1] for spec in exercise.functions(forward)]
    return ", ".join(f"`{name}`" for name in names) or "nothing new: run your components"


def _builds_on(exercise):
    labels = [catalog.BY_NAME[name].label for name in exercise.builds_on]
    return ", ".join(labels) or "-"


def exercise_table(workspace):
    """The markdown table of the workspace's exercises, in order."""
    rows = ["| # | exercise | write | in | builds on | tutorial |", "|---|---|---|---|---|---|"]
    for e in workspace.exercises:
        files = ", ".join(e.files(workspace.forward)) or "-"
        rows.append(f"| {e.number:02d} | {e.name}: {e.title} | {_functions(e, workspace.forward)} "
                    f"| {files} | {_builds_on(e)} | {e.section} |")
    return "\n".join(rows)


def workspace_readme(workspace, library):
    """The README.md text of ``workspace``; ``library`` is where the rest of npformer lives."""
    key = ("\n**This is an answer key** (`--solutions`): every body is the library's own. "
           "Do not hand it out.\n" if workspace.solutions else "")
    return f"""# npformer exercises

Written by `npformer exercises` (npformer {workspace.version}): {_written_by(workspace)}.
{key}
Each function to write raises `NotImplementedError("exercise NN (...)")` until you write
it; its docstring gives the shapes. Work in the order of the table: an exercise runs the
code of those it builds on. The files here are copies of npformer's own files with those
bodies taken out; everything else (`module.py`, `validate.py`, the files not here) is the
library's, in `{library}`. Only the files listed below are graded: keep
your code in them, with the names and signatures they have.

Grade everything, or one exercise by name or number:

    npformer grade {workspace.directory}
    npformer grade {workspace.directory} {workspace.exercises[0].name}

The grader runs your files inside a copy of npformer (a crash or an endless loop stays
inside it) and reports each exercise as not started, failing or done. A failing backward
is named with its worst element and relative error, compared with finite differences and
with the reference gradient, and the usual mistakes are diagnosed (a gradient assigned
instead of added, a sum over the wrong axis, a missing transpose, a missing 1/sqrt(D) or
mean factor, a mask left out of the backward, a sign flip). Then the claims the tutorial
makes about the component are checked. The exit status is 0 once every exercise is done.

The protocol your code follows (npformer's README, "The protocol"):
- `forward(inputs) -> (output, cache)`; `backward(d_output, cache) -> d_inputs`.
- A module's backward ADDS into each `Parameter.grad` (`+=`, `np.add.at` for lookups):
  a layer used twice receives both gradients.
- A function pair's backward returns one gradient per float input (None for integers).

{exercise_table(workspace)}
"""
