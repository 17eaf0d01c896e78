"""Mistakes named from a backward's formulas: an operand left out of one line, or a name put in
its sibling's place.

Each line of a backward undoes a forward line, and its formula is a sum of paths (LayerNorm's
d_x: the direct path, less the mean's path, less the path through the standard deviation) and
products of factors (a scaled embedding's sqrt(d), tanh GELU's sqrt(2/pi)). The commonest slip
inside a formula is one of them forgotten: a path not followed, a factor not carried. So every
sum, difference, product and division written in a backward gives candidates: the same
backward with one operand left out (``a - b`` as ``a`` or as ``-b``, ``a * b`` as ``a`` or
``b``, ``a / b`` as ``a``), each compiled from the function's own source. Like the catalogue's
edits, a candidate is named only where it computes what the code under test computes on every
failing output and gradient; unlike them it needs no one to have foreseen the slip, and it is
built from whichever backward is the reference: npformer's, or a convention's own (eps after
the root), whose text the catalogue's edits do not match.

The other slips inside a formula each give their candidates the same way: a name in its
sibling's place (``d_k`` computed from ``k`` where ``q`` belongs; siblings are the names a backward
writes side by side: ``q, k, v = ...``, ``return d_q, d_k, d_v``), a term's sign flipped, a factor
of a matrix product transposed or its transpose forgotten, a sum or mean over the wrong axis.
"""
from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass

from .patching import compile_function, function_source

WHAT_IS_LEFT_OUT = {      # operator: (what the left operand is, the right one), None where not dropped
    ast.Add: ("the term", "the term"),
    ast.Sub: ("the term", "the term"),
    ast.Mult: ("the factor", "the factor"),
    ast.Div: (None, "the division by"),
}
CONSEQUENCE = {"the term": "one path of the gradient is left out",
               "the factor": "the product lacks that factor",
               "the division by": "the quotient lost its divisor"}
LONGEST = 60                    # characters of a quoted operand or line before it is cut


@dataclass(frozen=True)
class Edit:
    """One line of a backward changed: what it is called and says, the line as written (its
    first line: what to re-check), and the function so edited."""

    what: str                   # "d_x without the term `mean`", "d_k from k instead of q"
    says: str
    line: str
    function: object

    def name(self, qualname):
        """The mistake's name: "layernorm_backward: d_x without the term `...`"."""
        return f"{qualname}: {self.what}"


def formula_edits(function, returned=()):
    """[Edit] of ``function``: each operand left out, each sibling put in another's place, each
    term's sign flipped, each factor of a product transposed (or its transpose undone), each
    reduction over another axis. ``returned``: the names of the gradients it returns, to say
    which one a returned term is of."""
    return [edit for edits in (omissions, substitutions, sign_flips, transposes, reduction_axes)
            for edit in edits(function, returned)]


def _quoted(text):
    text = " ".join(text.split())
    return f"`{text if len(text) <= LONGEST else text[:LONGEST - 3] + '...'}`"


def _parsed(function):
    """(source, its tree's def) of ``function``; None when it has no source or cannot be rebuilt
    apart from its class (``super()``)."""
    code = getattr(function, "__code__", None)
    try:
        source = function_source(function)
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    if code is None:
        return None
    names = set(code.co_names) | set(code.co_freevars)
    if "super" in names or "__class__" in names or not tree.body:
        return None
    return source, tree.body[0]


def _edits(function, changes):
    """[Edit] from ``changes``: (what, says, statement, node, text) each replacing ``node``'s
    text, each edited source compiled once."""
    source = function_source(function)
    lines = source.split("\n")
    found, seen = [], {source}
    for what, says, statement, node, text in changes:
        edited = _replaced(lines, node, text)
        if edited in seen:
            continue
        seen.add(edited)
        rebuilt = _rebuilt(function, edited)
        if rebuilt is not None:
            found.append(Edit(what, says, lines[statement.lineno - 1].strip(), rebuilt))
    return found


def _edit_kind(changes_of):
    """The public form of one kind of edit: ``kind(function, returned=())`` -> [Edit], from
    ``changes_of(source, definition, returned)``, which yields (what, says, statement, node,
    text): ``node``'s text replaced by ``text``."""
    def kind(function, returned=()):
        parsed = _parsed(function)
        if parsed is None:
            return []
        source, definition = parsed
        return _edits(function, changes_of(source, definition, returned))
    kind.__name__, kind.__qualname__, kind.__doc__ = changes_of.__name__, changes_of.__qualname__, changes_of.__doc__
    return kind


@_edit_kind
def omissions(source, definition, returned):
    """[Edit] of a function with one operand of one line left out."""
    for statement, node, keep, left_out, dropped in _drops(definition):
        target, operand = _target(statement, node, returned), _quoted(ast.get_source_segment(source, dropped))
        yield (f"{target} without {left_out} {operand}",
               f"{target} is computed without {left_out} {operand}: {CONSEQUENCE[left_out]}",
               statement, node, _kept_text(source, node, keep))


@_edit_kind
def substitutions(source, definition, returned):
    """[Edit] of a function with one use of a name read as one of its siblings."""
    groups = _sibling_groups(definition)
    for statement, node in _uses(definition):
        for other in groups.get(node.id, ()):
            target = _target(statement, node, returned)
            yield (f"{target} from {other} instead of {node.id}",
                   f"{target} is computed from {other} where {node.id} belongs: a sibling's value in "
                   f"its place", statement, node, other)


@_edit_kind
def sign_flips(source, definition, returned):
    """[Edit] of a function with one term added where it is subtracted, or subtracted where
    it is added."""
    for statement, node in _expressions(definition):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            left, right = (ast.get_source_segment(source, n) for n in (node.left, node.right))
            flipped, said = ("+", "added") if isinstance(node.op, ast.Sub) else ("-", "subtracted")
            target = _target(statement, node, returned)
            yield (f"{target} with the term {_quoted(right)} {said}",
                   f"{target} has the term {_quoted(right)} {said}: its sign is the other way round",
                   statement, node, f"(({left}) {flipped} ({right}))")


@_edit_kind
def transposes(source, definition, returned):
    """[Edit] of a function with one factor of a matrix product transposed, or one transpose
    (``.T``, ``.swapaxes(-1, -2)``) left out."""
    for statement, node in _expressions(definition):
        target = _target(statement, node, returned)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            for factor in (node.left, node.right):
                text = ast.get_source_segment(source, factor)
                yield (f"{target} with {_quoted(text)} transposed",
                       f"{target} multiplies by {_quoted(text)} transposed: the factor's axes are the "
                       f"other way round", statement, factor, f"({text}).swapaxes(-1, -2)")
        inner = _transposed(node)
        if inner is not None:
            text = ast.get_source_segment(source, inner)
            yield (f"{target} without the transpose of {_quoted(text)}",
                   f"{target} uses {_quoted(text)} where its transpose belongs", statement, node, f"({text})")


def _transposed(node):
    """x of ``x.T`` or ``x.swapaxes(-1, -2)``; else None."""
    if isinstance(node, ast.Attribute) and node.attr == "T":
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "swapaxes":
        return node.func.value
    return None


OTHER_AXES = ("-1", "-2", "0", "None")
REDUCTIONS = {"sum", "mean", "max", "min", "amax", "amin", "prod", "var", "std", "logsumexp"}


@_edit_kind
def reduction_axes(source, definition, returned):
    """[Edit] of a function with one ``axis=`` of a reduction given another value (the last
    axis, the one before it, the first, all of them)."""
    for statement, node in _expressions(definition):
        if not isinstance(node, ast.Call) or _called(node) not in REDUCTIONS:
            continue
        for keyword in node.keywords:
            if keyword.arg != "axis":
                continue
            now = ast.get_source_segment(source, keyword.value)
            target = _target(statement, node, returned)
            for other in (a for a in OTHER_AXES if a != now):
                yield (f"{target} reduced over axis={other}, not axis={now}",
                       f"{target} reduces over axis={other} where axis={now} belongs: a sum or mean over "
                       f"the wrong axis", statement, keyword.value, other)


def _called(call):
    """The name a call calls: "sum" of ``np.sum(...)`` and of ``x.sum(...)``."""
    function = call.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)


def _expressions(definition):
    """(statement, expression node) of every expression in the statements of ``definition``."""
    for statement in _statements(definition):
        for child in ast.iter_child_nodes(statement):
            if isinstance(child, ast.expr):
                for node in ast.walk(child):
                    yield statement, node


def _sizes(definition):
    """The statements that unpack a shape (``B, N, _ = x.shape``): sizes are no siblings."""
    return [s for s in ast.walk(definition) if isinstance(s, ast.Assign)
            and isinstance(s.value, ast.Attribute) and s.value.attr == "shape"]


def _sibling_groups(definition):
    """{name: [its siblings]}: names written side by side in one tuple or list of plain names
    (not sizes, nor one capital letter)."""
    groups = {}
    sizes = {id(s.targets[0]) for s in _sizes(definition)}
    for node in ast.walk(definition):
        if isinstance(node, (ast.Tuple, ast.List)) and id(node) not in sizes:
            names = [e.id for e in node.elts if isinstance(e, ast.Name) and e.id != "_"
                     and not (len(e.id) == 1 and e.id.isupper())]
            for name in names:
                groups.setdefault(name, [])
                groups[name] += [n for n in names if n != name and n not in groups[name]]
    return groups


def _uses(definition):
    """(statement, Name node) of every name read in the statements of ``definition`` (but those
    that read a shape)."""
    sizes = _sizes(definition)
    for statement, node in _expressions(definition):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and statement not in sizes:
            yield statement, node


def _statements(definition):
    """The statements of ``definition`` (nested ones too), in the order they are written."""
    found = [s for s in ast.walk(definition)
             if isinstance(s, ast.stmt) and s is not definition and not _is_docstring(s)]
    return sorted(found, key=lambda s: (s.lineno, s.col_offset))


def _drops(definition):
    """(statement, BinOp node, which operand to keep, what is left out, the dropped operand) of
    every sum, difference, product and division in the statements of ``definition``."""
    for statement, node in _expressions(definition):
        said = WHAT_IS_LEFT_OUT.get(type(node.op)) if isinstance(node, ast.BinOp) else None
        for side, left_out in zip(("left", "right"), said or ()):
            dropped = node.left if side == "left" else node.right
            if left_out is not None and not _is_one_or_zero(dropped):
                yield statement, node, "right" if side == "left" else "left", left_out, dropped


def _is_docstring(statement):
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and \
        isinstance(statement.value.value, str)


def _is_one_or_zero(node):
    return isinstance(node, ast.Constant) and node.value in (0, 1)


def _kept_text(source, node, keep):
    """The text that stands for ``node`` with one operand left out: ``(a)``, or ``(-(b))`` for
    ``a - b`` without ``a``."""
    kept = ast.get_source_segment(source, node.left if keep == "left" else node.right)
    if keep == "right" and isinstance(node.op, ast.Sub):
        return f"(-({kept}))"
    return f"({kept})"


def _replaced(lines, node, text):
    """The source with ``node``'s span replaced by ``text`` (ast's columns count UTF-8 bytes)."""
    first = lines[node.lineno - 1].encode()
    last = lines[node.end_lineno - 1].encode()
    middle = first[:node.col_offset].decode() + text + last[node.end_col_offset:].decode()
    return "\n".join(lines[:node.lineno - 1] + [middle] + lines[node.end_lineno:])


def _rebuilt(function, source):
    """``function`` compiled again from ``source`` in its own module's namespace, with its own
    closure's values (a convention's backward is a closure); None when a cell is still empty."""
    free = function.__code__.co_freevars
    filename = inspect.getsourcefile(function) or "<backward>"
    try:
        if not free:
            return compile_function(source, function.__name__, function.__globals__, filename)
        values = [cell.cell_contents for cell in function.__closure__]
        lines = source.split("\n")
        body = "\n".join("    " + line if line else line for line in lines[1:])
        outer = f"def _with_closure({', '.join(free)}):\n    {lines[0]}\n{body}\n    return {function.__name__}"
        return compile_function(outer, "_with_closure", function.__globals__, filename)(*values)
    except (ValueError, SyntaxError, NameError, TypeError):
        return None


def _target(statement, node, returned):
    """What the line with ``node`` computes: the name it assigns, or the gradient it returns."""
    if isinstance(statement, ast.Return):
        items = statement.value.elts if isinstance(statement.value, ast.Tuple) else [statement.value]
        for i, item in enumerate(items):
            if any(n is node for n in ast.walk(item)) and len(returned) == len(items):
                return returned[i]
        return "the returned gradient"
    if isinstance(statement, ast.Assign):
        return ", ".join(ast.unparse(t).strip("()") for t in statement.targets)
    if isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
        return ast.unparse(statement.target)
    return _quoted(statement.__class__.__name__.lower() if not isinstance(statement, ast.Expr)
                   else ast.unparse(statement.value).split("(")[0])

