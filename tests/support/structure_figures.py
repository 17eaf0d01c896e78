"""Structure figures of a package: import cycles, function and file lengths, speed idioms.

    python tests/support/structure_figures.py [PACKAGE_DIR]     # a table per file, then the totals

"Speed idioms" are the tricks the plain track leaves to ``npformer/fast/``: an ``out=``
argument, ``np.copyto``, and in-place ``*=``, ``/=``, ``-=`` (except a parameter update,
``p.data -= ...``; ``+=`` is accumulation, the protocol, and is not counted).
tests/project/test_structure.py asserts the limits on these figures (the function lengths and
the idioms; a file's length is shown, not capped).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

FAST_TRACK = "fast"


def modules(package_dir):
    """{dotted module name: path} of every .py file under ``package_dir``."""
    package_dir = Path(package_dir)
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(tree, name, is_package):
    """Dotted names a module imports, at any depth (function-level imports count)."""
    here = name.split(".") if is_package else name.split(".")[:-1]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[:len(here) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return names


def import_graph(package_dir):
    """{module: set of modules of the same package it imports} (a module importing its own
    parent package is not an edge: Python has already imported the parent)."""
    found = modules(package_dir)
    graph = {}
    for name, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = imported(tree, name, path.name == "__init__.py")
        graph[name] = {t for t in targets if t in found and t != name and not name.startswith(t + ".")}
    return graph


def cycles(graph):
    """Strongly connected groups of more than one module (each an import cycle)."""
    order, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        order[v] = low[v] = len(order)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in order:
            visit(v)
    return groups


def speed_idioms(tree):
    """(line, text) of every speed idiom in a module."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "out":
            found.append((node.value.lineno, "out="))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Mult, ast.Div, ast.Sub)):
            target = node.target
            update = isinstance(node.op, ast.Sub) and isinstance(target, ast.Attribute) \
                and target.attr == "data"
            if not update:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "copyto":
            found.append((node.lineno, "np.copyto"))
    return sorted(found)


def file_figures(path):
    """(lines, longest function, its name, speed idioms) of one file."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    functions = [(node.end_lineno - node.lineno + 1, node.name) for node in ast.walk(tree)
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    longest, name = max(functions, default=(0, ""))
    return len(text.splitlines()), longest, name, speed_idioms(tree)


def in_fast_track(package_dir, path):
    return FAST_TRACK in path.relative_to(package_dir).parts[:-1]


def report(package_dir):
    """Print a row per file and the totals; returns the totals as a dict."""
    package_dir = Path(package_dir)
    graph = import_graph(package_dir)
    print(f"{'file':36} {'lines':>6} {'longest function':>28} {'speed idioms':>13}")
    plain_idioms, longest, biggest = 0, (0, ""), (0, "")
    for path in sorted(package_dir.rglob("*.py")):
        lines, length, name, idioms = file_figures(path)
        rel = str(path.relative_to(package_dir.parent))
        fast = in_fast_track(package_dir, path)
        print(f"{rel:36} {lines:6d} {f'{length} {name}':>28} {len(idioms):>9}{' (fast)' if fast else ''}")
        plain_idioms += 0 if fast else len(idioms)
        longest = max(longest, (length, f"{rel}:{name}"))
        biggest = max(biggest, (lines, rel))
    totals = {"import cycles": cycles(graph), "longest function": longest,
              "longest file": biggest, "speed idioms outside the fast track": plain_idioms}
    for key, value in totals.items():
        print(f"{key}: {value}")
    return totals


if __name__ == "__main__":
    default = Path(__file__).resolve().parents[2] / "npformer"
    report(sys.argv[1] if len(sys.argv) > 1 else default)
