"""Mutation testing with mutmut: each file with the tests that cover it, in a scratch copy.

    pip install 'mutmut==2.5.1' whatthepatch
    python tests/mutation_run.py                    # every target below
    python tests/mutation_run.py testing            # one folder: testing, concepts or fast
    python tests/mutation_run.py npformer/t08_norm.py --jobs 2

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

The concept files and the fast track are mutated in their backward functions only (a patch
file lists those lines, ``--use-patch-file``); the verifier's files whole. The runs are long
(minutes per file on one core) and are not part of CI; docs/checking-your-code.md ("Mutation
testing") records the last results.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTEST = "python -m pytest -x -q -p no:cacheprovider -p no:xdist -p no:benchmark"
GRADIENTS = "tests/test_gradients.py"          # the gradient checks and the accumulation test


def _tests(*paths, k=None):
    """The runner: pytest over ``paths``, each ``(path, -k expression)`` pair or a path."""
    commands = []
    for path in paths:
        path, expr = path if isinstance(path, tuple) else (path, None)
        commands.append(f"{PYTEST} {path}" + (f" -k {expr!r}" if expr else ""))
    # mutmut runs the runner without a shell: several commands go through bash -c
    return commands[0] if len(commands) == 1 else f"bash -c {shlex.quote(' && '.join(commands))}"


STRANGERS, STYLES = "tests/test_conform_strangers.py", "tests/test_conform_styles.py"
# (folder, file, what is mutated: "all" or "backward" (the functions whose name says backward), runner)
TARGETS = [
    # the components whose reference references.py builds (a layer with its weights as arguments,
    # the KV cache) first: a mutant there is killed before the other components run
    ("testing", "npformer/testing/references.py", "all",
     _tests((STRANGERS, "strangers_component and (embedding or multi_head or swiglu or rope or kv_decode)"),
            (STRANGERS, "component or (slip_is_named and not too and not located) or assert"), STYLES)),
    ("testing", "npformer/testing/layers.py", "all", _tests((STRANGERS, "layer_conforms"), (STRANGERS, "named_too"))),
    ("testing", "npformer/testing/conventions.py", "all",
     _tests((STRANGERS, "convention"), (STRANGERS, "not convention"), STYLES)),
    ("concepts", "npformer/t01_embedding.py", "backward",
     _tests((GRADIENTS, "Embedding or LearnedPositions"), "tests/test_embedding_padding.py")),
    ("concepts", "npformer/t02_linear.py", "backward", _tests((GRADIENTS, "Linear or linear"))),
    ("concepts", "npformer/t03_softmax.py", "backward", _tests((GRADIENTS, "softmax"), "tests/test_softmax.py")),
    ("concepts", "npformer/t04_attention.py", "backward",
     _tests((GRADIENTS, "attention and not flash and not Cross"), "tests/test_gqa.py",
            ("tests/test_kv_cache.py", "refused"))),
    ("concepts", "npformer/t05_rope.py", "backward", _tests((GRADIENTS, "Rotary"))),
    ("concepts", "npformer/t06_activations.py", "backward", _tests((GRADIENTS, "relu or gelu or silu or tanh"),
                                                                       "tests/test_activations.py")),
    ("concepts", "npformer/t07_ffn.py", "backward", _tests((GRADIENTS, "FFN or swiglu or SwiGLU"))),
    ("concepts", "npformer/t08_norm.py", "backward", _tests((GRADIENTS, "LayerNorm or RMSNorm or layernorm or rmsnorm"))),
    ("concepts", "npformer/t09_block.py", "backward", _tests((GRADIENTS, "PreNormBlock or PostNormBlock"))),
    ("concepts", "npformer/t10_model.py", "backward", _tests((GRADIENTS, "TiedHead or DecoderLM"))),
    ("concepts", "npformer/t11_loss.py", "backward", _tests((GRADIENTS, "cross_entropy or log_softmax"))),
    ("concepts", "npformer/t14_moe.py", "backward", _tests((GRADIENTS, "MoE or Mixtral"), "tests/test_moe.py")),
    ("concepts", "npformer/t15_encoder.py", "backward",
     _tests((GRADIENTS, "Encoder and not EncoderDecoder or Pooler or mean_pool or l2_normalize"))),
    ("concepts", "npformer/t16_cross_attention.py", "backward", _tests((GRADIENTS, "CrossAttention"))),
    ("concepts", "npformer/t17_seq2seq.py", "backward", _tests((GRADIENTS, "EncoderDecoder"))),
    ("concepts", "npformer/t18_flash_attention.py", "backward", _tests((GRADIENTS, "flash"))),
    ("fast", "npformer/fast/attention.py", "backward", _tests(("tests/test_tracks.py", "attention"))),
    ("fast", "npformer/fast/ffn.py", "backward", _tests(("tests/test_tracks.py", "ffn or swiglu or gelu or silu"))),
    ("fast", "npformer/fast/flash_attention.py", "backward", _tests(("tests/test_tracks.py", "flash"))),
    ("fast", "npformer/fast/functional.py", "backward", _tests("tests/test_tracks.py")),
    ("fast", "npformer/fast/linear.py", "backward", _tests(("tests/test_tracks.py", "linear"))),
    ("fast", "npformer/fast/loss.py", "backward", _tests(("tests/test_tracks.py", "entropy or loss"))),
    ("fast", "npformer/fast/norm.py", "backward", _tests(("tests/test_tracks.py", "norm"))),
]


def backward_lines(path):
    """The body lines (docstrings left out) of every function or method named *backward*."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "backward" in node.name:
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
        if what == "backward":
            with open(os.path.join(copy, "mutate.patch"), "w", encoding="utf-8") as f:
                f.write(patch_of(os.path.join(copy, path), backward_lines(os.path.join(copy, path))).replace(
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
