"""How the grader judges learner slips written without its catalogue: every file of a blind set
(tests/data/blind43/) judged as ``npformer grade`` judges the exercise, in this process (the
learner's function patched into npformer, the fast way ``verdict.judge_exercise`` allows), its
report formatted as a learner reads it, then counted.

    python tests/support/blind_measure.py [--jobs 2] [--only 03-sm-] [--out FILE.json] [--show]

A blind set is two folders of small files, each one function as a learner wrote it:
``slips/`` (one slip each) and ``correct/`` (a correct rewrite, written differently from
npformer's). Each file opens with three comment lines::

    # exercise: softmax
    # function: t03_softmax.py:softmax_backward
    # slip: the sum term is missing: each weight depends on every score of its row

(``# correct: <how it is written>`` for a rewrite), then the whole ``def``. The hand-out is the
default workspace's (backward bodies only) for a backward function, and the one written with
``--forward`` for a forward function: a learner who was never asked for a forward cannot have
slipped there.

Each slip is counted once, in the first of:

- done: graded done (wrong code passed: must never happen);
- named wrongly: a mistake named in a function other than the slipped one, or a name
  ``review.json`` rejects for this slip;
- named: a mistake named in the slipped function (``review.json`` says which names are right;
  a name not yet reviewed is listed for a reader to judge, and counted "named, unreviewed");
- located: no name, but the report's "next:" points to the slipped function;
- values only: the report says which results differ, nothing more.

Correct rewrites must all be graded done.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))              # this tree's npformer, whatever is installed
sys.path.insert(0, str(ROOT / "tests" / "support"))
from learner_code import answer_key, judged_in_pool, learner_patches, with_body  # noqa: E402
BLIND = ROOT / "tests" / "data" / "blind43"
HEADER = ("exercise", "function")


def read_entry(path):
    """{"id", "exercise", "spec", "kind" ("slip" or "correct"), "what", "body"} of one file."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    fields = {}
    for line in lines[:3]:
        key, _, value = line.lstrip("# ").partition(": ")
        fields[key] = value.strip()
    kind = "slip" if "slip" in fields else "correct"
    if set(HEADER) - set(fields) or kind not in fields:
        raise ValueError(f"{path}: expected three header lines (exercise, function, slip or correct)")
    return {"id": Path(path).stem, "exercise": fields["exercise"], "spec": fields["function"], "kind": kind,
            "what": fields[kind], "body": "\n".join(lines[3:])}


def entries(folder=BLIND, only=()):
    """Every entry of the blind set in ``folder``, slips first."""
    found = []
    for part in ("slips", "correct"):
        for path in sorted((Path(folder) / part).glob("*.py")):
            entry = read_entry(path)
            if not only or any(entry["id"].startswith(o) for o in only):
                found.append(entry)
    return found


def rewritten(exercise, address, body, forward):
    """The patches a grading of the hand-out (``forward``: with its forward bodies) judges,
    the learner's copy of every function the key's, but ``address`` written as ``body``."""
    key = answer_key()
    file, qualname = address.split(":")
    source = with_body(Path(key.path(file)).read_text(encoding="utf-8"), qualname, body)
    return learner_patches(key, exercise, file, source, forward)


def judge(entry):
    """The verdict on one entry: status, report text, named mistakes, the "next:" function."""
    import warnings

    import numpy as np

    from npformer.exercises import catalog
    from npformer.exercises.grader import Outcome, _failing_function, _named_function
    from npformer.exercises.feedback import describe_run, format_outcome
    from npformer.exercises.verdict import judge_exercise
    from npformer.testing.computation import Patched
    exercise = catalog.exercise_named(entry["exercise"])
    forward = entry["spec"] not in exercise.backward
    start = time.process_time()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        patches = rewritten(exercise, entry["spec"], entry["body"], forward)
        result = judge_exercise(exercise, Patched(patches))
    status, lines = describe_run(exercise, result, 0, [], None, 120.0)
    first = _named_function(exercise, result) or _failing_function(exercise, result)
    report = format_outcome(Outcome(exercise, status, lines, first=first))
    named = {}
    for check in result["checks"] + result["claims"]:
        found = check.get("mistake")
        if found and not check.get("ok"):
            named.setdefault(found["name"], found["function"])
    return {"id": entry["id"], "kind": entry["kind"], "exercise": exercise.name, "spec": entry["spec"],
            "what": entry["what"], "status": status, "named": named, "next": first,
            "report": report, "cpu_s": round(time.process_time() - start, 2)}


def classify(row, review):
    """The one count a judged slip falls in (see the module's docstring)."""
    if row["kind"] == "correct":
        return "done" if row["status"] == "done" else "flagged"
    if row["status"] == "done":
        return "done"
    qualname = row["spec"].split(":")[1]
    judged = review.get(row["id"], {})
    if row["named"]:
        if any(function != qualname for function in row["named"].values()):
            return "named wrongly"
        if any(name in judged.get("wrong", ()) for name in row["named"]):
            return "named wrongly"
        if all(name in judged.get("right", ()) for name in row["named"]):
            return "named"
        return "named, unreviewed"
    if row["next"] and row["next"].split(" in ")[0] == qualname:
        return "located"
    return "values only"


COUNTS = ("named", "named, unreviewed", "named wrongly", "located", "values only", "done")


def summary(rows, review):
    """The lines that close a measurement: the counts, then each slip not named, by count."""
    slips = [r for r in rows if r["kind"] == "slip"]
    rewrites = [r for r in rows if r["kind"] == "correct"]
    counted = {r["id"]: classify(r, review) for r in rows}
    lines = [f"slips {len(slips)}: " + ", ".join(
        f"{name} {sum(counted[r['id']] == name for r in slips)}" for name in COUNTS)]
    named = sum(counted[r["id"]] == "named" for r in slips)
    lines.append(f"named {100 * named / max(len(slips), 1):.0f}%; correct rewrites {len(rewrites)}: done "
                 f"{sum(counted[r['id']] == 'done' for r in rewrites)}, flagged "
                 f"{[r['id'] for r in rewrites if counted[r['id']] != 'done']}")
    for name in COUNTS[1:]:
        for r in slips:
            if counted[r["id"]] == name:
                lines.append(f"  {name:17s} {r['id']}: {sorted(r['named'].items()) or r['next']}")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--only", default="", help="ids beginning with these (comma-separated)")
    parser.add_argument("--folder", default=str(BLIND))
    parser.add_argument("--out", help="write every entry's verdict, names and report here (JSON)")
    parser.add_argument("--show", action="store_true", help="print every slip's report")
    args = parser.parse_args(argv)
    os.environ.setdefault("NPFORMER_TRACK", "plain")
    todo = entries(args.folder, [o for o in args.only.split(",") if o])
    review_path = Path(args.folder) / "review.json"
    review = json.loads(review_path.read_text()) if review_path.exists() else {}
    rows, wall = judged_in_pool(judge, todo, args.jobs)
    rows.sort(key=lambda r: (r["kind"] != "slip", r["id"]))
    if args.show:
        for r in rows:
            print(f"==== {r['id']} ({classify(r, review)}): {r['what']}\n{r['report']}\nnext: {r['next']}\n")
    if args.out:
        Path(args.out).write_text(json.dumps([{**r, "count": classify(r, review)} for r in rows], indent=1))
    print("\n".join(summary(rows, review)))
    print(f"{len(rows)} entries in {wall:.0f} s wall, {sum(r['cpu_s'] for r in rows):.0f} s CPU")
    return 1 if any(classify(r, review) in ("done", "flagged") and r["kind"] == "slip" or
                    r["kind"] == "correct" and classify(r, review) != "done" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
