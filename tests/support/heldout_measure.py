"""How far to trust the grader, measured on the five held-out sets: every mistake and every
correct rewrite judged as ``npformer grade`` judges it (the grader's own number of drawn
inputs, not the suite's fewer), then counted.

    python tests/support/heldout_measure.py [--jobs 2] [--sets heldout5,...] [--out FILE.json]

For each set it prints how many mistakes were graded done (wrong code passed), named (a
catalogued mistake named) and shown only (failing, with the failing tensor and smallest
example but no name), and how many correct rewrites were flagged. ``--out`` keeps every
entry's verdict and names, so that a reader can check a name against the entry's "what".
The suite's tests/grade/test_grader.py judges a sample of the same sets on every run; this script
is the whole measurement, a few seconds per entry.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from learner_code import answer_key, judged_in_pool, learner_patches, with_body  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"      # the held-out sets
SETS = ("heldout", "heldout2", "heldout3", "heldout4", "heldout5")


def entry_source(key, kind, item):
    """The text of the key's file of ``item`` as the held-out entry has it: a mistake's edit
    made, or a correct rewrite's body put in place of its function."""
    text = Path(key.path(item["file"])).read_text(encoding="utf-8")
    if kind == "mistake" and item["old"] not in text:     # judged as it is, it would be the key itself
        raise ValueError(f"{item['id']}: its old text is no longer in {item['file']}: update the entry")
    return (text.replace(item["old"], item["new"], 1) if kind == "mistake"
            else with_body(text, item["function"], item["body"]))


def _judge(entry):
    """(set, id, kind, verdict, names, seconds) for one held-out entry."""
    from npformer.exercises import catalog
    from npformer.exercises.verdict import judge_exercise
    from npformer.testing.computation import Patched
    folder, kind, item = entry
    key = answer_key()
    start = time.process_time()
    exercise = catalog.holding(f"{item['file']}:{item['function']}")
    patches = learner_patches(key, exercise, item["file"], entry_source(key, kind, item))
    result = judge_exercise(exercise, Patched(patches))
    checks = result["checks"] + result["claims"]
    names = sorted({c["mistake"]["name"] for c in checks if c.get("mistake")})
    verdict = "failing" if any(not c["ok"] for c in checks) else "done"
    return folder, item["id"], kind, verdict, names, time.process_time() - start


def entries(sets):
    for folder in sets:
        for item in json.loads((DATA / folder / "mistakes.json").read_text()):
            yield folder, "mistake", item
        alternatives = DATA / folder / "alternatives.json"
        for item in json.loads(alternatives.read_text()) if alternatives.exists() else []:
            yield folder, "alternative", item


def summary(rows, sets):
    lines = []
    for folder in sets + ("all",):
        mine = [r for r in rows if folder in ("all", r[0])]
        wrong = [r for r in mine if r[2] == "mistake"]
        right = [r for r in mine if r[2] == "alternative"]
        done = [r[1] for r in wrong if r[3] == "done"]
        named = [r for r in wrong if r[3] == "failing" and r[4]]
        flagged = [r[1] for r in right if r[3] != "done"]
        lines.append(f"{folder:9s} mistakes {len(wrong):4d}: named {len(named):4d} "
                     f"({100 * len(named) / max(len(wrong), 1):.1f}%), shown only "
                     f"{len(wrong) - len(named) - len(done):3d}, graded done {len(done):2d} {done}; "
                     f"correct rewrites {len(right):3d}: flagged {len(flagged)} {flagged}")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--out", help="write every entry's verdict and names here (JSON)")
    args = parser.parse_args(argv)
    sets = tuple(args.sets.split(","))
    todo = list(entries(sets))
    rows, wall = judged_in_pool(_judge, todo, args.jobs, every=25)
    rows.sort()
    if args.out:
        Path(args.out).write_text(json.dumps([dict(zip(("set", "id", "kind", "verdict", "names", "cpu_s"), r))
                                              for r in rows], indent=1))
    print("\n".join(summary(rows, sets)))
    print(f"{len(rows)} entries in {wall:.0f} s wall, "
          f"{sum(r[5] for r in rows):.0f} s CPU, {args.jobs} process(es)")
    return 1 if any(r[3] == "done" for r in rows if r[2] == "mistake") else 0


if __name__ == "__main__":
    sys.exit(main())
