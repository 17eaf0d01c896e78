"""A learner's code made from the answer key: one function rewritten, the rest as the key has it,
patched into npformer the way ``verdict.judge_exercise`` takes it (in this process, no walls).

The held-out and blind measurements and the grader's tests all judge code made so:
``with_body`` puts a rewritten function into a file's text, ``learner_patches`` turns the
exercise's files (one of them replaced) into the patches of the learner's functions, and
``answer_key`` writes one key per process for the scripts that judge in a pool, and
``judged_in_pool`` runs such a script's judge over its entries, saying how far it has come.
"""
from __future__ import annotations

import ast
import multiprocessing
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

_KEY = None


def answer_key():
    """One answer key (forward bodies included) per process, written on first use."""
    global _KEY
    if _KEY is None:
        from npformer.exercises.workspace import write_workspace
        _KEY = write_workspace(Path(tempfile.mkdtemp()) / "key", solutions=True, forward=True)
    return _KEY


def with_body(source, qualname, body):
    """``source`` with the function ``qualname`` replaced by ``body`` (a whole def)."""
    from npformer.exercises.stubs import functions_by_qualname
    node = functions_by_qualname(ast.parse(source))[qualname]
    lines = source.split("\n")
    first = node.lineno - 1 - len(node.decorator_list)
    new = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * node.col_offset).split("\n")
    return "\n".join(lines[:first] + new + lines[node.end_lineno:])


def learner_patches(key, exercise, file, source, forward=True, where=None):
    """{path under npformer: the learner's function} for every function ``exercise`` hands out
    (``forward``: its forward bodies too), each file's text the key's but ``file``'s, which is
    ``source``; the learner's files are written under ``where`` (a new folder when None)."""
    from npformer.exercises.learner import learner_functions
    where = Path(where or tempfile.mkdtemp())
    by_file = {}
    for address in exercise.functions(forward):
        name, qualname = address.split(":")
        by_file.setdefault(name, []).append(qualname)
    patches = {}
    for name, qualnames in by_file.items():
        text = source if os.path.basename(name) == os.path.basename(file) else \
            Path(key.path(name)).read_text(encoding="utf-8")
        module = "npformer." + name[:-3].replace("/", ".")
        patches.update(learner_functions(text, module, qualnames, str(where / os.path.basename(name))))
    return patches


def judged_in_pool(judge, todo, jobs, every=20):
    """[judge(entry) for entry in todo], in any order, in ``jobs`` fresh processes (each its own
    npformer and answer key); every ``every`` entries the count and the time go to stderr."""
    start, rows = time.time(), []
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        for n, row in enumerate(pool.imap_unordered(judge, todo), 1):
            rows.append(row)
            if n % every == 0 or n == len(todo):
                print(f"{n} of {len(todo)} judged, {time.time() - start:.0f} s", file=sys.stderr, flush=True)
    return rows, time.time() - start
