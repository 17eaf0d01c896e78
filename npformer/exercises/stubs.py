"""Cutting exercises out of a plain-track file, and recognising the cuts again.

``cut(source, stubs, hints)`` returns the file a learner receives: the same text with
each named function's body (after its docstring) replaced by one
``raise NotImplementedError("exercise NN (...): ...")`` and the ``@fast_twin`` decorators
and their import removed (a workspace file is plain maths only). The hints come in tiers:

- ``"formulas"``: the module docstring whole (its backward formulas included) and every
  comment of the cut bodies;
- ``"shapes"`` (the default): the functions' docstrings (with their shapes) and, of the
  cut bodies' comments, only the forward lines each step undoes (``# forward: y = x @ W``);
  no backward formula anywhere;
- ``"none"``: no backward formula, no comment of the cut bodies, and of a cut function's
  docstring only its first line.

``stub_state`` tells, from a learner's file, which of its functions still hold the
untouched stub.
"""
from __future__ import annotations

import ast
import json
import re

STUB_PREFIX = "exercise "
# a gradient formula line in a module docstring: "dx = ...", "d_W += ...", "d logits = ..."
GRADIENT_LINE = re.compile(r"^\s*d[ _]?[A-Za-z]\w*\s*\+?=\s")


def functions_by_qualname(tree):
    """{"Linear.backward": node, "linear_backward": node, ...} of a parsed module."""
    found = {}

    def walk(body, prefix):
        """Record the functions of ``body``, classes' methods under their class name."""
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[prefix + node.name] = node
            elif isinstance(node, ast.ClassDef):
                walk(node.body, f"{prefix}{node.name}.")
    walk(tree.body, "")
    return found


def _has_docstring(node):
    first = node.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
        and isinstance(first.value.value, str)


def _is_comment_or_blank(line):
    return not line.strip() or line.lstrip().startswith("#")


def body_span(lines, node):
    """(first, last) 0-based line indices of the body after the docstring (empty if first > last)."""
    if _has_docstring(node):
        first = node.body[0].end_lineno                  # the line after the docstring
    else:
        first = node.body[0].lineno - 1
        while first - 1 > node.lineno - 1 and _is_comment_or_blank(lines[first - 1]):
            first = first - 1                             # comments opening the body belong to it
    last = node.end_lineno - 1
    depth = len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip())
    while last + 1 < len(lines) and lines[last + 1].lstrip().startswith("#") \
            and len(lines[last + 1]) - len(lines[last + 1].lstrip()) > depth:
        last = last + 1                                   # trailing comments of the body
    return first, last


def stub_line(indent, message):
    """The one statement that replaces a body."""
    return f"{indent}raise NotImplementedError({json.dumps(message, ensure_ascii=False)})"


HINTS = ("none", "shapes", "formulas")


def forward_hint(comment):
    """The forward statement a backward comment names ("# forward: y = x @ W + b"), without
    whatever follows it, or None when the comment is not such a line."""
    text = comment.strip()
    if not text.startswith("# forward:"):
        return None
    # a full stop ends the statement, an ellipsis does not ("x = ... + P[positions]")
    statement = re.sub(r"(?<=[^.])\.$", "", text[len("# forward:"):].rstrip("; "))
    statement = re.sub(r" \([^()]*\)$", "", statement)                  # a closing remark
    statement = re.split(r"(?<=[^\s.])[.;] |, so |: ", statement)[0]
    return "# forward:" + re.sub(r"(?<=[^.])[.;]$", "", statement)


def _kept_comments(lines, hints):
    comments = [line.strip() for line in lines if line.lstrip().startswith("#")]
    if hints == "formulas":
        return comments
    if hints == "shapes":
        return [hint for hint in map(forward_hint, comments) if hint]
    return []


def _cut_body(lines, node, message, hints):
    first, last = body_span(lines, node)
    statement = node.body[1] if _has_docstring(node) and len(node.body) > 1 else node.body[-1]
    indent = " " * statement.col_offset
    if hints == "none" and _has_docstring(node):          # the docstring's first line only
        summary = ast.get_docstring(node).split("\n")[0].replace(chr(34) * 3, "")
        return node.body[0].lineno - 1, last, [f'{indent}"""{summary}"""', stub_line(indent, message)]
    kept = [indent + comment for comment in _kept_comments(lines[first:last + 1], hints)]
    return first, last, kept + [stub_line(indent, message)]


def _strip_fast_twin(tree, lines, edits):
    """Edits that drop ``@fast_twin`` lines and the import of ``fast_twin``."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Name) and decorator.id == "fast_twin":
                    edits.append((decorator.lineno - 1, decorator.end_lineno - 1, []))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("core.track"):
            others = [a for a in node.names if a.name != "fast_twin"]
            if len(others) < len(node.names):
                text = [f"from {'.' * node.level}{node.module} import {', '.join(a.name for a in others)}"] if others else []
                edits.append((node.lineno - 1, node.end_lineno - 1, text))


def hide_formulas(docstring_lines):
    """The module docstring without its backward formulas: paragraphs opening with
    "Backward" (and the indented block right after them), and gradient-formula lines."""
    out, skipping, previous_blank = [], False, True
    for line in docstring_lines:
        blank = not line.strip()
        if previous_blank and not blank:
            opens_backward = re.match(r"^\s*(the\s+)?backward", line, re.IGNORECASE) is not None
            continues = skipping and line[:1].isspace()
            skipping = opens_backward or continues
        previous_blank = blank
        if skipping or GRADIENT_LINE.match(line):
            continue
        if blank and out and not out[-1].strip():
            continue                                       # no double blank lines left behind
        out.append(line)
    return out


def _hide_module_formulas(tree, lines, edits):
    if not (tree.body and _has_docstring(tree)):
        return
    first, last = tree.body[0].lineno - 1, tree.body[0].end_lineno - 1
    kept = hide_formulas(lines[first:last + 1])
    closed = kept[-1].rstrip().endswith('"""') and (len(kept) > 1 or kept[0].count('"""') == 2)
    if not closed:                                        # the closing quotes went with a formula
        kept.append('"""')
    while len(kept) > 2 and kept[-1].strip() == '"""' and not kept[-2].strip():
        del kept[-2]                                      # no blank line left before the closing quotes
    edits.append((first, last, kept))


def cut(source, stubs, hints="shapes"):
    """The learner's copy of ``source``: ``stubs`` maps qualname -> stub message (empty: keep
    bodies); ``hints``: "none", "shapes" or "formulas" (see the module docstring)."""
    if hints not in HINTS:
        raise ValueError(f"hints: expected one of {', '.join(HINTS)}, got {hints!r}")
    tree = ast.parse(source)
    lines = source.split("\n")
    functions = functions_by_qualname(tree)
    missing = sorted(set(stubs) - set(functions))
    if missing:
        raise ValueError(f"stubs: no function {missing} in this file")
    edits = []
    for qualname, message in stubs.items():
        edits.append(_cut_body(lines, functions[qualname], message, hints))
    _strip_fast_twin(tree, lines, edits)
    if hints != "formulas":
        _hide_module_formulas(tree, lines, edits)
    for first, last, replacement in sorted(edits, key=lambda e: e[0], reverse=True):
        lines[first:last + 1] = replacement
    text = "\n".join(lines)
    ast.parse(text)                                       # the cut file must still be Python
    return text


def is_stub(node):
    """True when a function's body (after its docstring) is exactly one workspace stub."""
    body = node.body[1:] if _has_docstring(node) else node.body
    if len(body) != 1 or not isinstance(body[0], ast.Raise):
        return False
    raised = body[0].exc
    return isinstance(raised, ast.Call) and isinstance(raised.func, ast.Name) \
        and raised.func.id == "NotImplementedError" and len(raised.args) == 1 \
        and isinstance(raised.args[0], ast.Constant) \
        and str(raised.args[0].value).startswith(STUB_PREFIX)


def stub_state(source, qualnames):
    """{qualname: "stub" | "written" | "missing"} for a learner's file (SyntaxError if it does not parse)."""
    functions = functions_by_qualname(ast.parse(source))
    return {name: ("missing" if name not in functions else
                   "stub" if is_stub(functions[name]) else "written") for name in qualnames}
