"""Mutation testing with mutmut: each file with the tests that cover it, in a scratch copy.

    pip install 'mutmut==2.5.1' whatthepatch
    python tests/support/mutation_run.py                    # every target below
    python tests/support/mutation_run.py specs              # one folder: specs, concepts or fast
    python tests/support/mutation_run.py npformer/t08_norm.py --jobs 2

mutmut seeds one small edit at a time (an operator, a number, a keyword, an argument) into a
file, runs the file's tests (pytest -x: the first failure kills the mutant) and counts the
mutants no test noticed. This script copies the work tree to a temporary folder first and
mutates the copy (``PYTHONPATH`` points there), so a mutant never lands in the work tree, and
prints per target the mutants, killed, survived and suspicious ones, the time, and each
survivor's diff; ``--keep DIR`` leaves each target's mutmut cache in DIR for ``mutmut show``.

Why mutmut 2 and not 3: mutmut 3 mutates a copy through "trampolines" that it skips for
decorated functions (every ``@fast_twin`` backward of the concept files) and that replace the
source the catalogue of mistakes edits (``patching.edited`` reads a function's source); mutmut
2 edits the file itself, one mutant at a time, so every line can be mutated and npformer runs
as it always does. The configuration in pyproject.toml (``[tool.mutmut]``) is the default
target; the table below names the others.

The verifier's references (each spec's float64 forward and backward functions and its
conventions' variants, in ``npformer/specs/``) are mutated with the strangers' tests of that
spec's components and layers; the concept files and the fast track in their backward functions
only, with each concept's own test file (a patch file lists the lines, ``--use-patch-file``).
The runs are long (minutes per file on one core) and are not part of CI;
docs/checking-your-code.md ("Mutation testing") records the last results.
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from npformer.specs import SPECS  # noqa: E402
from support.gradients import own_test_file  # noqa: E402
PYTEST = "python -m pytest -x -q -p no:cacheprovider -p no:xdist -p no:benchmark"


def _tests(*paths, k=None):
    """The runner: pytest over ``paths``, each ``(path, -k expression)`` pair or a path."""
    commands = []
    for path in paths:
        path, expr = path if isinstance(path, tuple) else (path, None)
        commands.append(f"{PYTEST} {path}" + (f" -k {expr!r}" if expr else ""))
    # mutmut runs the runner without a shell: several commands go through bash -c
    return commands[0] if len(commands) == 1 else f"bash -c {shlex.quote(' && '.join(commands))}"


STRANGERS = "tests/verify/test_conform_strangers.py"
# which functions are mutated: any whose name holds "backward" in a concept file; in a spec,
# those named forward or backward or ending so (the references, the conventions' variants, the
# gradient-check harnesses), not the claims that merely mention a backward
CHOSEN = {"backward": lambda name: "backward" in name,
          "references": lambda name: name in ("forward", "backward") or name.endswith(("_forward", "_backward"))}
# (folder, file, what is mutated: "references" (functions whose name says forward or backward)
# or "backward" (those that say backward), runner)
TARGETS = [
    ("fast", "npformer/fast/attention.py", "backward", _tests(("tests/fast/test_tracks.py", "attention"))),
    ("fast", "npformer/fast/ffn.py", "backward", _tests(("tests/fast/test_tracks.py", "ffn or swiglu or gelu or silu"))),
    ("fast", "npformer/fast/flash_attention.py", "backward", _tests(("tests/fast/test_tracks.py", "flash"))),
    ("fast", "npformer/fast/functional.py", "backward", _tests("tests/fast/test_tracks.py")),
    ("fast", "npformer/fast/linear.py", "backward", _tests(("tests/fast/test_tracks.py", "linear"))),
    ("fast", "npformer/fast/loss.py", "backward", _tests(("tests/fast/test_tracks.py", "entropy or loss"))),
    ("fast", "npformer/fast/norm.py", "backward", _tests(("tests/fast/test_tracks.py", "norm"))),
]
# each spec's references (the float64 forward and backward every verdict is measured against,
# its conventions' variants and its gradient-check harnesses) with the strangers' tests of its
# components and layers, then its concept's own test file (which runs the spec's cases)
def _spec_runner(spec):
    """The strangers' tests of the spec's components and layers, then its concept's own tests."""
    own = f"tests/{own_test_file(spec.concept)}"
    tests = [(STRANGERS, " or ".join(spec.components + spec.layers))]
    if os.path.exists(os.path.join(ROOT, own)):
        tests.append(own)
    return _tests(*tests)


TARGETS[:0] = [("specs", f"npformer/specs/{spec.concept.replace('/', '.')}", "references", _spec_runner(spec))
               for spec in SPECS if spec.components or spec.layers]
# each concept file with its own test file (which runs its gradient checks) and the tests that
# reach the rest of its backward code
MORE = {"t01_embedding.py": ("tests/concepts/test_embedding_padding.py",),
        "t04_attention.py": ("tests/concepts/test_gqa.py", ("tests/concepts/test_kv_cache.py", "refused"))}
TARGETS[:0] = [("concepts", f"npformer/{spec.concept}", "backward",
                 _tests(f"tests/{own_test_file(spec.concept)}", *MORE.get(spec.concept, ())))
                for spec in SPECS if os.path.exists(os.path.join(ROOT, "tests", own_test_file(spec.concept)))]


def _a_fact(node):
    """True for a function a spec registers as a claim or a property (``@spec.claim(...)``)."""
    return any(isinstance(d, ast.Call) and getattr(d.func, "attr", None) in ("claim", "prop")
               for d in node.decorator_list)


def lines_of(path, chosen):
    """The body lines (docstrings left out) of every function or method whose name ``chosen``
    accepts, claims and properties left out."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and chosen(node.name) and not _a_fact(node):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                body = body[1:]
            for statement in body:
                lines.update(range(statement.lineno, statement.end_lineno + 1))
    return sorted(lines)


def patch_of(path, lines):
    """A unified diff that "adds" ``lines`` of ``path``: mutmut's --use-patch-file then mutates
    only them."""
    text = open(path, encoding="utf-8").read().split("\n")
    hunks, run = [], []
    for n in lines:
        if run and n != run[-1] + 1:
            hunks.append(run)
            run = []
        run.append(n)
    if run:
        hunks.append(run)
    out = [f"--- {path}", f"+++ {path}"]
    for hunk in hunks:
        out.append(f"@@ -{hunk[0] - 1},0 +{hunk[0]},{len(hunk)} @@")
        out += ["+" + text[n - 1] for n in hunk]
    return "\n".join(out) + "\n"


def copy_tree(into):
    """The work tree as it is (uncommitted edits included), without .git and caches."""
    ignore = shutil.ignore_patterns(".git", ".hypothesis", ".mutmut-cache", "__pycache__", "*.egg-info",
                                    "runs", "build", "dist", "html")
    shutil.copytree(ROOT, into, ignore=ignore, dirs_exist_ok=True)


def run_target(folder, path, what, runner, keep=None):
    """Run mutmut on one target in its own copy; -> (folder, path, counts, seconds, survivors)."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="npformer-mutants-") as copy:
        copy_tree(copy)
        command = ["mutmut", "run", "--paths-to-mutate", path, "--runner", runner, "--tests-dir", "tests/",
                   "--no-progress", "--simple-output"]
        if what in CHOSEN:
            with open(os.path.join(copy, "mutate.patch"), "w", encoding="utf-8") as f:
                f.write(patch_of(os.path.join(copy, path), lines_of(os.path.join(copy, path), CHOSEN[what])).replace(
                    f"{copy}/", ""))
            command += ["--use-patch-file", "mutate.patch"]
        env = {**os.environ, "PYTHONPATH": copy, "CI": "true"}
        log = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True)
        counts = {kind: _ids(copy, env, kind) for kind in ("killed", "survived", "timeout", "suspicious")}
        survivors = [subprocess.run(["mutmut", "show", str(i)], cwd=copy, env=env, capture_output=True,
                                    text=True).stdout for i in counts["survived"]]
        if keep:
            target = os.path.join(keep, path.replace("/", "_"))
            os.makedirs(target, exist_ok=True)
            shutil.copy(os.path.join(copy, ".mutmut-cache"), target)
        if not any(counts.values()):
            survivors = [log.stdout[-3000:] + log.stderr[-3000:]]
    return folder, path, {k: len(v) for k, v in counts.items()}, time.perf_counter() - started, survivors


def _ids(copy, env, kind):
    out = subprocess.run(["mutmut", "result-ids", kind], cwd=copy, env=env, capture_output=True, text=True).stdout
    return [int(x) for x in re.findall(r"\d+", out)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("only", nargs="*", help="folders (testing, concepts, fast) or files; all by default")
    parser.add_argument("--jobs", type=int, default=1, help="targets run at once (one core each)")
    parser.add_argument("--keep", help="a folder to keep each target's .mutmut-cache in")
    args = parser.parse_args(argv)
    chosen = [t for t in TARGETS if not args.only or t[0] in args.only or t[1] in args.only]
    if not chosen:
        parser.error(f"no target matches {args.only}")
    total = {}
    with ThreadPoolExecutor(args.jobs) as pool:
        for folder, path, counts, seconds, survivors in pool.map(lambda t: run_target(*t, keep=args.keep), chosen):
            mutants = sum(counts.values())
            print(f"{folder:9} {path:40} {mutants:4} mutants: {counts['killed']:4} killed, "
                  f"{counts['survived']:3} survived, {counts['timeout'] + counts['suspicious']:2} "
                  f"timeout/suspicious ({seconds:.0f} s)", flush=True)
            for diff in survivors:
                print("    " + diff.strip().replace("\n", "\n    "), flush=True)
            row = total.setdefault(folder, [0, 0, 0, 0.0])
            row[0] += mutants
            row[1] += counts["killed"] + counts["timeout"] + counts["suspicious"]
            row[2] += counts["survived"]
            row[3] += seconds
    for folder, (mutants, killed, survived, seconds) in total.items():
        print(f"{folder}: {mutants} mutants, {killed} killed, {survived} survived ({seconds / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
