"""Mistakes named from the structure of a backward, not from a catalogue: what any backward can
get wrong about what it returns.

A backward returns one gradient per input (and adds a Module's parameters' gradients into their
``.grad``). Whatever its formula, it can return two of them in each other's place, one with the
wrong sign or a constant factor off (twice, half, the 1/sqrt(D) of attention left out or applied
twice), a parameter's gradient summed over the first sequence only, or assign a ``.grad`` instead
of adding to it. Each such change of npformer's own backward is one more candidate mistake,
built here from the function itself (its return statement names the gradients), and judged by
the engine's one matcher like a catalogued one: it is named only where it computes what the code
under test computes, on every failing output and gradient. Inside its formulas, one line
changed (an operand left out, a sibling in its place, a sign, a transpose, an axis) is
``formulas``'s. The catalogue (``mistakes``) keeps what neither can say: a term changed into
another, a forward's slips.
"""
from __future__ import annotations

import ast
import copy
import functools
import inspect
import itertools
import re
import textwrap
from dataclasses import dataclass

import numpy as np

from .formulas import formula_edits
from .patching import ROOT, reference, resolve
from .patching import qualname as qualname_of

def _per_head(power):
    """The factor sqrt(D) ** power of an attention gradient [B, H, N, D] (1 for any other)."""
    return lambda out: np.sqrt(out.shape[-1]) ** power if out.ndim == 4 else 1.0


FACTORS = {                     # what changes: (the factor, what it says, the line to re-check)
    "negated": (lambda out: -1.0, "a sign flip: {names} {have} the wrong sign", "the sign of each term"),
    "doubled": (lambda out: 2.0, "{names} {are} twice the right value: a term counted twice?", "each term once"),
    "halved": (lambda out: 0.5, "{names} {are} half the right value", "the constant factors"),
    "without 1/sqrt(D)": (_per_head(1), "{names} {lack} the factor 1/sqrt(D) of the scores",
                          "scores = q k^T / sqrt(D): d_q and d_k carry 1/sqrt(D)"),
    "1/sqrt(D) twice": (_per_head(-1), "{names} {carry} the factor 1/sqrt(D) twice",
                        "scores = q k^T / sqrt(D): d_q and d_k carry 1/sqrt(D) once"),
}
VERBS = {"{have}": ("has", "have"), "{are}": ("is", "are"), "{lack}": ("lacks", "lack"),
         "{carry}": ("carries", "carry")}
SUBSETS_UP_TO = 3               # returned gradients a factor may be applied to together (all subsets)


@dataclass(frozen=True)
class Structural:
    """A change of what npformer's ``function`` (a path under npformer) returns: named, said and
    re-checked like a catalogued ``Mistake``; ``change(original, args, kwargs)`` calls npformer's
    function and gives the wrong value."""

    name: str
    function: str
    says: str
    recheck: str
    change: object

    @property
    def qualname(self):
        """The function's name inside its file ("attention_backward", "Embedding.backward")."""
        return qualname_of(self.function)

    def patches(self):
        """{"npformer.<function>": npformer's function, its result changed}."""
        path = f"{ROOT}.{self.function}"
        original = reference(path)
        change = self.change

        @functools.wraps(original)
        def changed(*args, **kwargs):
            return change(original, args, kwargs)
        return {path: changed}


def returned_names(function):
    """The names of the gradients ``function`` returns: its docstring's "-> (d_q, d_k, d_v)", or
    its last ``return`` of a tuple of plain names, or None."""
    said = re.search(r"->\s*\(([^)]*)\)", inspect.getdoc(function) or "")
    if said:
        names = tuple(n.strip() for n in said.group(1).split(","))
        if len(names) > 1 and all(n.isidentifier() for n in names):
            return names
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
            names = [e.id if isinstance(e, ast.Name) else None for e in node.value.elts]
            if all(names):
                found = tuple(names)
    return found


def _listed(names):
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _verb(text, count):
    for key, (one, many) in VERBS.items():
        text = text.replace(key, one if count == 1 else many)
    return text


def _swapped(i, j):
    def change(original, args, kwargs):
        out = original(*args, **kwargs)
        if not isinstance(out, tuple) or max(i, j) >= len(out):
            return out
        out = list(out)
        out[i], out[j] = out[j], out[i]
        return tuple(out)
    return change


def _scaled(indices, factor):
    def change(original, args, kwargs):
        out = original(*args, **kwargs)
        single = not isinstance(out, tuple)
        items = [out] if single else list(out)
        if max(indices) >= len(items) or any(not isinstance(items[i], np.ndarray) for i in indices):
            return out
        for i in indices:
            items[i] = items[i] * factor(items[i])
        return items[0] if single else tuple(items)
    return change


def _first_sequence(index):
    """The gradient ``index`` (one without the batch axis: a parameter's) from the first
    sequence of the batch alone: the backward run again on d_out zero past sequence 0."""
    def change(original, args, kwargs):
        out = original(*args, **kwargs)
        d_out = args[0] if args else None
        if not (isinstance(out, tuple) and index < len(out) and isinstance(d_out, np.ndarray)
                and d_out.ndim >= 2 and d_out.shape[0] > 1 and isinstance(out[index], np.ndarray)
                and out[index].ndim < d_out.ndim):
            return out
        first = np.zeros_like(d_out)
        first[0] = d_out[0]
        again = original(first, *args[1:], **kwargs)
        return out[:index] + (again[index],) + out[index + 1:]
    return change


def _assigned(names):
    """A Module's backward that assigns the gradients of its parameters ``names`` (all of them
    when None) instead of adding to what ``.grad`` held."""
    def change(original, args, kwargs):
        module = args[0]
        params = [(n, p) for n, p in module.named_parameters() if names is None or n in names]
        held = [p.grad.copy() for _, p in params]
        out = original(*args, **kwargs)
        for (_, p), before in zip(params, held):
            p.grad[...] = p.grad - before
        return out
    return change


def of_function(path):
    """[Structural] of npformer's backward at ``path`` ("t04_attention.attention_backward"): what
    it returns changed, then one of its lines changed (``formulas``)."""
    try:
        function = reference(f"{ROOT}.{path}")
    except (ValueError, AttributeError, ImportError):
        return []
    return of_returned(path) + in_formulas(path, function)


def in_formulas(path, backward):
    """[Structural]: ``backward`` (npformer's at ``path``, or a convention's own) with one line
    changed (``formulas.formula_edits``), named after npformer's function at ``path``."""
    qualname, names = qualname_of(path), returned_names(reference(f"{ROOT}.{path}")) or ()
    return [Structural(e.name(qualname), path, e.says, e.line, _instead(e.function))
            for e in formula_edits(backward, names)]


def _instead(function):
    return lambda original, args, kwargs: function(*args, **kwargs)


def of_returned(path):
    """[Structural]: what npformer's backward at ``path`` returns, changed (gradients swapped,
    scaled, from the first sequence only; a Module's ``.grad`` assigned)."""
    try:
        function = reference(f"{ROOT}.{path}")
        _, owner, _ = resolve(f"{ROOT}.{path}")
        qualname = qualname_of(path)
    except (ValueError, AttributeError, ImportError):
        return []
    names = returned_names(function) or ()
    found = []
    recheck_order = f"return {', '.join(names)}" if names else ""
    for i, j in itertools.combinations(range(len(names)), 2):
        found.append(Structural(f"{qualname}: {names[i]} and {names[j]} swapped", path,
                                f"{names[j]}'s value is returned in {names[i]}'s place and {names[i]}'s in "
                                f"{names[j]}'s: the gradients come back in another order",
                                recheck_order, _swapped(i, j)))
    outputs = list(names) or ["the gradient"]
    subsets = [s for r in range(1, min(len(outputs), SUBSETS_UP_TO) + 1)
               for s in itertools.combinations(range(len(outputs)), r)]
    for key, (factor, says, recheck) in FACTORS.items():
        for subset in subsets:
            said = [outputs[i] for i in subset]
            found.append(Structural(f"{qualname}: {_listed(said)} {key}", path,
                                    _verb(says.replace("{names}", _listed(said)), len(said)), recheck,
                                    _scaled(subset, factor)))
    for i, name in enumerate(names):
        found.append(Structural(f"{qualname}: {name} from the first sequence only", path,
                                f"{name} sums over the first sequence of the batch only: a parameter's gradient "
                                f"sums over every sequence and position", f"{name} summed over axes (0, ..., -2)",
                                _first_sequence(i)))
    if isinstance(owner, type) and hasattr(owner, "named_parameters"):
        found += [Structural(f"{qualname}: {what} assigned", path,
                             f"{what} is assigned, not accumulated: a layer used twice (a tied head, a second "
                             f"backward pass) must receive both gradients", "p.grad += ... for every parameter",
                             _assigned(params)) for what, params in _parameter_sets(owner)]
    return found


def on_convention(path, backward):
    """[(Structural, rebuild)]: the changes of npformer's backward at ``path``, each made to
    ``backward`` instead, a convention's own backward (eps after the root, a finite mask fill),
    which patching npformer's functions never reaches. ``rebuild(reference)`` is the reference
    subject with its backward so changed."""
    def rebuild_with(change):
        def rebuild(reference):
            changed = copy.copy(reference)
            changed.backward = lambda *args, **kwargs: change(backward, args, kwargs)
            return changed
        return rebuild
    return [(mistake, rebuild_with(mistake.change)) for mistake in of_returned(path) + in_formulas(path, backward)]


def _parameter_sets(owner):
    """(how to say it, parameter names or None for all) of a Module class's own parameters:
    each one alone, and all of them (names read from a small instance when one can be made)."""
    return [("every parameter's .grad", None)]


def of_functions(paths):
    """[Structural] of every backward among ``paths`` (paths under npformer)."""
    return [s for path in paths if path.rsplit(".", 1)[-1].endswith("backward") for s in of_function(path)]


def candidates(paths):
    """[(Structural, its patches)] of the backwards among ``paths``, each built once."""
    found = []
    for mistake in of_functions(paths):
        try:
            found.append((mistake, mistake.patches()))
        except (ValueError, AttributeError, TypeError):
            continue
    return found
