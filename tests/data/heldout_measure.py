"""How far to trust the grader, measured on the five held-out sets: every mistake and every
correct rewrite judged as ``npformer grade`` judges it (the grader's own number of drawn
inputs, not the suite's fewer), then counted.

    python tests/data/heldout_measure.py [--jobs 2] [--sets heldout5,...] [--out FILE.json]

For each set it prints how many mistakes were graded done (wrong code passed), named (a
catalogued mistake named) and shown only (failing, with the failing tensor and smallest
example but no name), and how many correct rewrites were flagged. ``--out`` keeps every
entry's verdict and names, so that a reader can check a name against the entry's "what".
The suite's tests/grade/test_grader.py judges a sample of the same sets on every run; this script
is the whole measurement, a few seconds per entry.
"""
from __future__ import annotations

import argparse
import ast
import json
import multiprocessing
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent
SETS = ("heldout", "heldout2", "heldout3", "heldout4", "heldout5")
_KEY = None


def _key():
    """One answer key per worker process."""
    global _KEY
    if _KEY is None:
        from npformer.exercises.workspace import write_workspace
        _KEY = write_workspace(Path(tempfile.mkdtemp()) / "key", solutions=True, forward=True)
    return _KEY


def _with_body(source, qualname, body):
    """``source`` with the function ``qualname`` replaced by ``body`` (a whole def)."""
    from npformer.exercises.stubs import functions_by_qualname
    node = functions_by_qualname(ast.parse(source))[qualname]
    lines = source.split("\n")
    first = node.lineno - 1 - len(node.decorator_list)
    new = textwrap.indent(textwrap.dedent(body), " " * node.col_offset).split("\n")
    return "\n".join(lines[:first] + new + lines[node.end_lineno:])


def _judge(entry):
    """(set, id, kind, verdict, names, seconds) for one held-out entry."""
    from npformer.exercises import catalog
    from npformer.exercises.verdict import judge_exercise
    from npformer.testing.computation import Patched
    from npformer.exercises.learner import learner_functions
    folder, kind, item = entry
    key = _key()
    start = time.process_time()
    exercise = catalog.holding(f"{item['file']}:{item['function']}")
    text = Path(key.path(item["file"])).read_text()
    edited = (text.replace(item["old"], item["new"], 1) if kind == "mistake"
              else _with_body(text, item["function"], item["body"]))
    where = Path(tempfile.mkdtemp())
    patches = {}
    by_file = {}
    for spec in exercise.functions(True):
        name, qualname = spec.split(":")
        by_file.setdefault(name, []).append(qualname)
    for name, qualnames in by_file.items():
        source = edited if os.path.basename(name) == os.path.basename(item["file"]) else Path(key.path(name)).read_text()
        module = "npformer." + name[:-3].replace("/", ".")
        patches.update(learner_functions(source, module, qualnames, str(where / os.path.basename(name))))
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
    start = time.time()
    rows = []
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for n, row in enumerate(pool.imap_unordered(_judge, todo), 1):
            rows.append(row)
            if n % 25 == 0 or n == len(todo):
                print(f"{n} of {len(todo)} judged, {time.time() - start:.0f} s", file=sys.stderr, flush=True)
    rows.sort()
    if args.out:
        Path(args.out).write_text(json.dumps([dict(zip(("set", "id", "kind", "verdict", "names", "cpu_s"), r))
                                              for r in rows], indent=1))
    print("\n".join(summary(rows, sets)))
    print(f"{len(rows)} entries in {time.time() - start:.0f} s wall, "
          f"{sum(r[5] for r in rows):.0f} s CPU, {args.jobs} process(es)")
    return 1 if any(r[3] == "done" for r in rows if r[2] == "mistake") else 0


if __name__ == "__main__":
    sys.exit(main())
