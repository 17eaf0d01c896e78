"""The time to grade a class: N submissions through `npformer grade SUBMISSIONS --course`, once.

    python benchmarks/grade_class.py [--n 40] [--jobs 2] [--exercises softmax,linear] [--keep DIR]

It writes a hand-out and its course file, then N submissions made from the answer key with
the mix a teacher sees: about half complete, a third with a catalogued mistake seeded into
one to three exercises, the rest half done (the later exercises still stubs). It runs the
grader once, in a process of its own, and prints the wall time, the mean per submission, the
CPU seconds the grading processes used, and the machine (CPU model, load, OpenBLAS settings).
The submissions are the same for the same --n and --seed.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import OPENBLAS_VARS, cpu_model, load_average  # noqa: E402
from npformer.exercises import catalog  # noqa: E402
from npformer.exercises.course import write_course  # noqa: E402
from npformer.exercises.workspace import write_workspace  # noqa: E402
from npformer.testing.mistakes import of_functions  # noqa: E402

KINDS = ("complete", "mistakes", "half done")
MIX = (0.5, 0.33, 0.17)                # of the submissions: complete, with mistakes, half done


def seeded_mistakes(key, exercise):
    """[(file in the key, old text, new text)] of the catalogued mistakes of ``exercise``'s
    backward bodies whose edit appears exactly once in its file."""
    found = []
    for spec in exercise.backward:
        file = key.path(spec.split(":")[0])
        text = Path(file).read_text(encoding="utf-8")
        for mistake in of_functions([catalog.module_path(spec)]):
            edits = zip(*((mistake.old, mistake.new) if isinstance(mistake.old, tuple) else
                          ((mistake.old,), (mistake.new,))))
            edits = list(edits)
            if all(text.count(old) == 1 for old, _ in edits):
                found.append((os.path.basename(file), edits))
    return found


def build_class(folder, n, exercises, seed=0):
    """The hand-out, its course file, and ``n`` submissions under ``folder``; returns
    (course path, submissions folder, {kind: count})."""
    folder = Path(folder)
    handout = write_workspace(folder / "handout", only=exercises)
    key = write_workspace(folder / "key", only=exercises, solutions=True)
    course = folder / "course.json"
    write_course(course, handout)
    subs = folder / "submissions"
    subs.mkdir()
    rng = random.Random(seed)
    chosen = [catalog.exercise_named(name) for name in exercises]
    with_bodies = [e for e in chosen if e.backward]
    counts = dict.fromkeys(KINDS, 0)
    for i in range(n):
        kind = KINDS[0] if i == 0 else rng.choices(KINDS, MIX)[0]
        counts[kind] += 1
        target = subs / f"student{i:02d}"
        shutil.copytree(handout.directory, target)
        files = sorted({os.path.basename(f) for e in chosen for f in e.files()})
        done = files if kind != "half done" else files[:max(1, len(files) // 2)]
        for name in done:
            shutil.copy(key.path(name), target / name)
        if kind == "mistakes" and with_bodies:
            for exercise in rng.sample(with_bodies, min(len(with_bodies), rng.randint(1, 3))):
                options = seeded_mistakes(key, exercise)
                if not options:
                    continue
                name, edits = rng.choice(options)
                text = (target / name).read_text(encoding="utf-8")
                for old, new in edits:
                    text = text.replace(old, new)
                (target / name).write_text(text, encoding="utf-8")
    return course, subs, counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=40, help="submissions (default 40)")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once (default 2)")
    parser.add_argument("--exercises", default=None,
                        help="comma-separated exercise names (default: every exercise)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", metavar="DIR", default=None,
                        help="build the class in DIR (must not exist) and keep it; default: a temporary folder")
    args = parser.parse_args(argv)
    if args.n < 1 or args.jobs < 1:
        parser.error("--n, --jobs: expected whole numbers >= 1")
    names = args.exercises.split(",") if args.exercises else [e.name for e in catalog.available()]
    for name in names:
        catalog.exercise_named(name)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="grade-class-"))
    if args.keep:
        folder.mkdir(parents=True)
    try:
        course, subs, counts = build_class(folder, args.n, names, args.seed)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        command = [sys.executable, "-m", "npformer", "grade", str(subs), "--course", str(course),
                   "--out", str(folder / "gradebook"), "--jobs", str(args.jobs)]
        load_before = load_average()
        began = time.monotonic()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.monotonic() - began
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode not in (0, 1) or not (folder / "gradebook" / "gradebook.csv").exists():
            print(done.stderr[-3000:], file=sys.stderr)
            print(f"grade_class: the grader failed with exit code {done.returncode}", file=sys.stderr)
            return 1
        rows = (folder / "gradebook" / "gradebook.csv").read_text(encoding="utf-8").splitlines()[1:]
        statuses = {}
        for row in rows:
            status = row.split(",")[2]
            statuses[status] = statuses.get(status, 0) + 1
        print(f"class: {args.n} submissions ({', '.join(f'{v} {k}' for k, v in counts.items())}) of "
              f"{len(names)} exercises, --jobs {args.jobs}")
        print(f"graded: {', '.join(f'{v} {k}' for k, v in sorted(statuses.items()))} (exercise rows)")
        print(f"wall time: {wall:.1f} s; per submission: {wall / args.n:.1f} s "
              f"({wall * args.jobs / args.n:.1f} s of one job each)")
        print(f"CPU time of the grading processes: {cpu.ru_utime + cpu.ru_stime:.1f} s "
              f"({(cpu.ru_utime + cpu.ru_stime) / args.n:.1f} s per submission)")
        settings = ", ".join(f"{v}={os.environ.get(v, 'unset')}" for v in OPENBLAS_VARS)
        print(f"machine: {cpu_model()}, {os.cpu_count()} cores, load {load_before:.1f} before and "
              f"{load_average():.1f} after; {settings}")
        if args.keep:
            print(f"kept: {folder}")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
