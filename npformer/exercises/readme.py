"""The README a workspace opens with: the exercises in order, how each is graded, the hints."""
from __future__ import annotations

import os

HINT_TIERS = {
    "none": "no hints: each function to write keeps the first line of its docstring",
    "shapes": "each function to write keeps its docstring (with the shapes) and, in a backward, "
              "the forward line each step undoes; no backward formula",
    "formulas": "the backward formulas too, at the head of each file and in the bodies",
}


def _written_by(workspace):
    bodies = "backward bodies" + (" and forward bodies" if workspace.forward else "")
    return f"{bodies}; hints: {HINT_TIERS[workspace.hints]}"


def _functions(exercise, forward):
    names = [address.split(":")[1] for address in exercise.functions(forward)]
    return ", ".join(f"`{name}`" for name in names) or "nothing new: your components together"


def exercise_table(workspace):
    """The markdown table of the workspace's exercises, in order."""
    rows = ["| # | exercise | write | in | tutorial |", "|---|---|---|---|---|"]
    for e in workspace.exercises:
        files = ", ".join(os.path.basename(f) for f in e.files(workspace.forward)) or "-"
        rows.append(f"| {e.number:02d} | {e.name}: {e.title} | {_functions(e, workspace.forward)} "
                    f"| {files} | {e.section} |")
    return "\n".join(rows)


def workspace_readme(workspace):
    """The README.md text of ``workspace``."""
    key = ("\n**This is an answer key** (`--solutions`): every body is the library's own. "
           "Do not hand it out.\n" if workspace.solutions else "")
    return f"""# npformer exercises

Written by `npformer exercises` (npformer {workspace.version}): {_written_by(workspace)}.
{key}
Each function to write raises `NotImplementedError("exercise NN (...)")` until you write
it. The files here are copies of npformer's own with those bodies taken out; only the
functions of the table are graded, and everything else in a file is npformer's own code,
so keep your code inside those functions (helpers of your own at the top level of the
file are fine), with the names and signatures they have.

Grade everything, or one exercise by name or number:

    npformer grade {workspace.directory}
    npformer grade {workspace.directory} {workspace.exercises[0].name}

Each exercise is graded alone: your functions for that exercise, npformer's own for
everything else (the attention exercise runs with npformer's softmax, whatever yours does),
so a mistake shows up once, in the exercise that holds it. Your code runs in its own
process (a crash or an endless loop stays there; a loop is stopped and shown where it was).
The grader draws inputs that reach every line (masks, rows with nothing to read, GQA
groups, windows, both RoPE layouts, ignored targets), compares your output and every
gradient with npformer's, checks the properties the maths promises, and when a result
differs shows the smallest input that shows it and names the mistake when it is a known
one ("the mistake, in softmax_backward: ..."), with the formula line to re-check. The last
exercise, training, runs all your components together, once the exercises it uses are
done. The exit status is 0 once every exercise is done; `--show-output` shows what your
code printed even when it passes.

The protocol your code follows:
- `forward(inputs) -> (output, cache)`; `backward(d_output, cache) -> d_inputs`.
- A module's backward ADDS into each `Parameter.grad` (`+=`, `np.add.at` for lookups):
  a layer used twice receives both gradients.
- A function pair's backward returns one gradient per float input (None for integers).

{exercise_table(workspace)}
"""
