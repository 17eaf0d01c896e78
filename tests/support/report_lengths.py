"""How long the grader's reports are: every entry of the held-out sets judged as
``npformer grade`` judges it, its report formatted as a learner reads it, then measured.

    python tests/support/report_lengths.py [--sets heldout5,...] [--jobs 1] [--out FILE.json]

Prints the longest reports (lines and bytes) and the distribution; ``--out`` keeps every
entry's line and byte count. A report is one exercise's text (``feedback.format_outcome``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import heldout_measure as measure          # noqa: E402  (its entries)
from learner_code import answer_key, judged_in_pool, learner_patches  # noqa: E402


def _report(entry):
    """(set, id, kind, exercise, status, lines, bytes, text, names) of one held-out entry."""
    from npformer.exercises import catalog
    from npformer.exercises.grader import Outcome
    from npformer.exercises.verdict import judge_exercise
    from npformer.testing.computation import Patched
    from npformer.exercises.feedback import describe_run, format_outcome
    folder, kind, item = entry
    key = answer_key()
    exercise = catalog.holding(f"{item['file']}:{item['function']}")
    patches = learner_patches(key, exercise, item["file"], measure.entry_source(key, kind, item))
    result = judge_exercise(exercise, Patched(patches))
    status, lines = describe_run(exercise, result, 0, [], None, 120.0)
    report = format_outcome(Outcome(exercise, status, lines))
    names = sorted({c["mistake"]["name"] for c in result["checks"] + result["claims"] if c.get("mistake")})
    return (folder, item["id"], kind, exercise.name, status, len(report.split("\n")), len(report.encode()), report,
            names)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--sets", default="heldout5")
    parser.add_argument("--out", help="write every entry's counts (and the longest reports' text) here")
    args = parser.parse_args(argv)
    todo = list(measure.entries(tuple(args.sets.split(","))))
    rows, wall = judged_in_pool(_report, todo, args.jobs, every=25)
    rows.sort(key=lambda r: -r[5])
    failing = [r for r in rows if r[4] != "done"]
    for r in rows[:10]:
        print(f"{r[5]:6d} lines {r[6]:8d} bytes  {r[0]} {r[1]} ({r[3]}, {r[4]})")
    counts = sorted(r[5] for r in failing) or [0]
    print(f"{len(rows)} reports ({len(failing)} failing): longest {counts[-1]} lines, median "
          f"{counts[len(counts) // 2]}, over 150 lines: {sum(c > 150 for c in counts)}; "
          f"largest {max(r[6] for r in rows)} bytes; {wall:.0f} s")
    if args.out:
        Path(args.out).write_text(json.dumps([dict(zip(("set", "id", "kind", "exercise", "status", "lines",
                                                        "bytes"), r[:7]), names=r[8], text=r[7])
                                              for r in rows], indent=1))


if __name__ == "__main__":
    main()
