"""Check the held-out mistakes and alternatives against a fresh answer key.

    python tests/data/heldout/check.py            (from the worktree root)

Writes an answer key (``npformer exercises KEY --solutions``) to a temporary directory, then:

- every mistake (mistakes.json): its exercise lists its function (backward bodies for
  kind "backward", forward bodies for kind "forward"); ``old`` occurs exactly once in the key's
  file and lies inside that function; the edited file compiles; every case of that file
  (harness.py) runs without raising; and at least one number differs from the key's
  (relative difference above 1e-7, or a NaN/inf or shape the key does not have);
- every alternative (alternatives.json): its ``body`` (a whole ``def``, written at column 0,
  indented to the def it replaces) compiles in place of the key's function, differs from the
  key's text, and gives every number of every case equal to the key's within 1e-10 relative in
  float64, and within 1e-4 relative with the same dtype in float32.

Prints one line per failure and a summary line; exits 1 if anything failed.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import tempfile
import textwrap
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from npformer.exercises.catalog import BY_NAME  # noqa: E402

MISTAKE_TOLERANCE = 1e-7      # a mistake must move some number by more than this (relative)
EQUAL_FLOAT64 = 1e-10         # an alternative must stay within this (relative), float64
EQUAL_FLOAT32 = 1e-4          # ... and within this, float32
REQUIRED = ("id", "exercise", "file", "function", "old", "new", "what", "kind")
REQUIRED_ALT = ("id", "exercise", "file", "function", "body", "style")


def write_key(directory):
    subprocess.run([sys.executable, "-m", "npformer", "exercises", str(directory), "--solutions"],
                   cwd=ROOT, check=True, capture_output=True)


def key_file(key, relpath):
    """The key's copy of ``relpath`` (a workspace is one flat folder)."""
    path = key / relpath
    return path if path.exists() else key / Path(relpath).name


def function_node(source, qualname):
    """The ast node of ``qualname`` ("f" or "Class.method") in ``source``, or None."""
    body = ast.parse(source).body
    node = None
    for part in qualname.split("."):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return node if isinstance(node, ast.FunctionDef) else None


def line_offsets(source):
    offsets, total = [], 0
    for line in source.splitlines(keepends=True):
        offsets.append(total)
        total += len(line)
    offsets.append(total)
    return offsets


def span(source, qualname):
    """Character range [start, stop) of the function's lines, decorators included."""
    node = function_node(source, qualname)
    if node is None:
        return None
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    offsets = line_offsets(source)
    return offsets[first - 1], offsets[node.end_lineno]


def relative_difference(a, b):
    """max |a - b| / max |b|, |a| over the finite entries; inf for a shape or NaN/inf mismatch."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return np.inf
    a, b = a.astype(np.float64), b.astype(np.float64)
    finite_a, finite_b = np.isfinite(a), np.isfinite(b)
    if (finite_a != finite_b).any() or not np.array_equal(a[~finite_a], b[~finite_b], equal_nan=True):
        return np.inf
    if not finite_a.any():
        return 0.0
    diff = np.abs(a[finite_a] - b[finite_b]).max()
    if diff == 0:
        return 0.0
    return diff / max(np.abs(a[finite_a]).max(), np.abs(b[finite_b]).max())


def compare(results, reference):
    """(worst relative difference, its label) over every label of the reference."""
    if set(results) != set(reference):
        return np.inf, "labels differ"
    worst = max(((relative_difference(results[k], reference[k]), k) for k in reference), key=lambda t: t[0])
    return worst


def run_quietly(module, relpath, dtype=np.float64):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return harness.run(module, relpath, dtype)


class Checker:
    def __init__(self, key):
        self.key = key
        self.sources, self.reference = {}, {}
        self.failures = []

    def source(self, relpath):
        if relpath not in self.sources:
            text = key_file(self.key, relpath).read_text()
            self.sources[relpath] = text
            module = harness.load(relpath, text)
            self.reference[relpath] = {np.float64: run_quietly(module, relpath),
                                       np.float32: run_quietly(module, relpath, np.float32)}
        return self.sources[relpath]

    def fail(self, entry, message):
        self.failures.append(f"{entry.get('id', '?')}: {message}")
        return False

    def check_entry_fields(self, entry, required, kinds):
        missing = [name for name in required if not isinstance(entry.get(name), str)]
        if missing:
            return self.fail(entry, f"missing fields {missing}")
        exercise = BY_NAME.get(entry["exercise"])
        if exercise is None:
            return self.fail(entry, f"unknown exercise {entry['exercise']!r}")
        spec = f"{entry['file']}:{entry['function']}"
        listed = {"backward": exercise.backward, "forward": exercise.forward}
        if not any(spec in listed[kind] for kind in kinds):
            return self.fail(entry, f"{spec} is not a {'/'.join(kinds)} body of exercise {exercise.label}")
        if entry["file"] not in harness.CASES:
            return self.fail(entry, f"no cases for {entry['file']}")
        return True

    def mistake(self, entry):
        if not self.check_entry_fields(entry, REQUIRED, (entry.get("kind"),)):
            return False
        if entry["kind"] not in ("backward", "forward"):
            return self.fail(entry, f"kind {entry['kind']!r}")
        relpath, old, new = entry["file"], entry["old"], entry["new"]
        source = self.source(relpath)
        count = source.count(old)
        if count != 1:
            return self.fail(entry, f"old occurs {count} times in the key's {relpath}")
        where = span(source, entry["function"])
        start = source.index(old)
        if where is None or not (where[0] <= start and start + len(old) <= where[1]):
            return self.fail(entry, f"old is not inside {entry['function']}")
        if old == new:
            return self.fail(entry, "old and new are the same")
        edited = source.replace(old, new)
        try:
            compile(edited, relpath, "exec")
        except SyntaxError as error:
            return self.fail(entry, f"the edited file does not compile: {error}")
        if function_node(edited, entry["function"]) is None:
            return self.fail(entry, f"{entry['function']} is gone after the edit")
        try:
            module = harness.load(relpath, edited)
            results = run_quietly(module, relpath)
        except Exception as error:  # a mistake must not crash on ordinary inputs
            return self.fail(entry, f"crashes: {type(error).__name__}: {error}")
        worst, label = compare(results, self.reference[relpath][np.float64])
        if not worst > MISTAKE_TOLERANCE:
            return self.fail(entry, f"changes nothing (worst relative difference {worst:.1e} at {label})")
        return True

    def alternative(self, entry):
        if not self.check_entry_fields(entry, REQUIRED_ALT, ("backward",)):
            return False
        relpath, body = entry["file"], entry["body"]
        source = self.source(relpath)
        node = function_node(source, entry["function"])
        start, stop = span(source, entry["function"])
        replacement = textwrap.indent(textwrap.dedent(body), " " * node.col_offset)
        if not replacement.endswith("\n"):
            replacement += "\n"
        if textwrap.dedent(source[start:stop]).strip() == textwrap.dedent(body).strip():
            return self.fail(entry, "the body is the key's own")
        edited = source[:start] + replacement + source[stop:]
        try:
            compile(edited, relpath, "exec")
        except SyntaxError as error:
            return self.fail(entry, f"does not compile: {error}")
        new_node = function_node(edited, entry["function"])
        if new_node is None or ast.get_docstring(new_node) is None:
            return self.fail(entry, f"{entry['function']} is missing or has no docstring after the edit")
        try:
            module = harness.load(relpath, edited)
            results64 = run_quietly(module, relpath)
            results32 = run_quietly(module, relpath, np.float32)
        except Exception as error:
            return self.fail(entry, f"crashes: {type(error).__name__}: {error}")
        worst, label = compare(results64, self.reference[relpath][np.float64])
        if not worst <= EQUAL_FLOAT64:
            return self.fail(entry, f"float64: relative difference {worst:.1e} at {label}")
        reference32 = self.reference[relpath][np.float32]
        worst, label = compare(results32, reference32)
        if not worst <= EQUAL_FLOAT32:
            return self.fail(entry, f"float32: relative difference {worst:.1e} at {label}")
        dtypes = [k for k in reference32 if np.asarray(results32[k]).dtype != np.asarray(reference32[k]).dtype]
        if dtypes:
            return self.fail(entry, f"float32: dtype differs from the key's at {dtypes[0]}")
        return True


def main():
    mistakes = json.loads((HERE / "mistakes.json").read_text())
    alternatives = json.loads((HERE / "alternatives.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "key"
        write_key(key)
        checker = Checker(key)
        for name, entries in (("mistakes", mistakes), ("alternatives", alternatives)):
            ids = Counter(entry.get("id") for entry in entries)
            for duplicate in [i for i, n in ids.items() if n > 1]:
                checker.failures.append(f"{name}: id {duplicate!r} used {ids[duplicate]} times")
        good_mistakes = sum(checker.mistake(entry) for entry in mistakes)
        good_alternatives = sum(checker.alternative(entry) for entry in alternatives)
    for failure in checker.failures:
        print("FAIL", failure)
    per_exercise = Counter(entry["exercise"] for entry in mistakes)
    per_function = Counter(f"{entry['file']}:{entry['function']}" for entry in alternatives)
    print("mistakes per exercise:", ", ".join(f"{k} {v}" for k, v in per_exercise.items()))
    print("alternatives per function:", ", ".join(f"{k} {v}" for k, v in per_function.items()))
    print(f"heldout check: {good_mistakes}/{len(mistakes)} mistakes ok "
          f"({sum(e.get('kind') == 'backward' for e in mistakes)} backward, "
          f"{sum(e.get('kind') == 'forward' for e in mistakes)} forward, {len(per_exercise)} exercises), "
          f"{good_alternatives}/{len(alternatives)} alternatives ok, "
          f"{len(checker.failures)} failure{'s' if len(checker.failures) != 1 else ''}")
    return 1 if checker.failures else 0


if __name__ == "__main__":
    sys.exit(main())
