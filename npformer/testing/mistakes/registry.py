"""The record of a catalogued mistake and the catalogue itself, read from its data files.

A mistake is a small wrong version of one of npformer's functions, written as an edit of
its source (the text ``old`` replaced by ``new``, as a learner's line would differ from the
right one), with what it says to the learner and the formula line to re-check. The grader
and ``conform`` compute each mistake's results on the same inputs as the code under test;
when they agree everywhere, the mistake is named.

The catalogue is data: one JSON file per concept file, named after it (``t02_linear.json``
for ``npformer/t02_linear.py``, ``t19_optim.json`` for ``npformer/t19_optim.py``),
a list of objects {"name", "function" (its qualname in that file: "linear_backward",
"Linear.backward"), "old", "new", "says", "recheck"}; ``old`` and ``new`` are a text, or
lists of texts for a mistake of several edits, made in turn.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..patching import ROOT, StaleMistake, edited, resolve
from ..patching import qualname as qualname_of

HERE = Path(__file__).resolve().parents[2] / "specs"      # each beside its concept's spec
FIELDS = ("name", "function", "old", "new", "says", "recheck")


@dataclass(frozen=True)
class Mistake:
    """One wrong version of ``function`` (a path under npformer: "t03_softmax.softmax_backward")."""

    name: str
    function: str
    old: str
    new: str
    says: str                    # what is wrong, in one line, as a teacher would say it
    recheck: str                 # the formula line to re-check

    @property
    def qualname(self):
        """The function's name inside its file ("softmax_backward", "MultiHeadAttention.backward")."""
        return qualname_of(self.function)

    def patches(self):
        """{"npformer.<function>": the wrong function}, for ``patching.patched``."""
        path = f"{ROOT}.{self.function}"
        return {path: edited(path, self.old, self.new)}


def _edit(value, where):
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError(f"{where}: expected a text or a list of texts, got {value!r}")


def read(path):
    """[Mistake] of one data file, in its order; its name is the module of their functions."""
    module = Path(path).name[:-len(".json")]
    entries = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a list of mistakes, got {type(entries).__name__}")
    found = []
    for i, entry in enumerate(entries):
        where = f"{Path(path).name}[{i}]"
        if not isinstance(entry, dict) or set(entry) != set(FIELDS):
            raise ValueError(f"{where}: expected an object with the keys {', '.join(FIELDS)}, got "
                             f"{sorted(entry) if isinstance(entry, dict) else entry!r}")
        old, new = _edit(entry["old"], f"{where}.old"), _edit(entry["new"], f"{where}.new")
        if isinstance(old, tuple) != isinstance(new, tuple) or (isinstance(old, tuple) and len(old) != len(new)):
            raise ValueError(f"{where}: expected as many texts in new as in old, got {old!r} and {new!r}")
        found.append(Mistake(entry["name"], f"{module}.{entry['function']}", old, new, entry["says"],
                             entry["recheck"]))
    return found


def files(directory=HERE):
    """The catalogue's data files, in the order of the concept files."""
    return sorted(Path(directory).glob("*.json"))


CATALOGUE = [found for path in files() for found in read(path)]   # every Mistake, file by file


def applicable(mistakes):
    """([(mistake, its patches)], {file: count}): the mistakes whose edit still applies, and
    how many of the others no longer do, per concept file (an edited concept file leaves its
    stale mistakes out, never stops a check)."""
    usable, stale = [], {}
    for found in mistakes:
        try:
            usable.append((found, found.patches()))
        except (StaleMistake, SyntaxError, ImportError, AttributeError, OSError, TypeError):
            where = _file_of(found.function)
            stale[where] = stale.get(where, 0) + 1
    return usable, stale


def _file_of(function):
    """The concept file of a function path: "t02_linear.py", "t19_optim.py"."""
    try:
        module = resolve(f"{ROOT}.{function}")[0].__name__
    except (ValueError, AttributeError):
        return function.split(".")[0] + ".py"
    return module[len(ROOT) + 1:].replace(".", "/") + ".py"


def stale_warning(stale):
    """ "3 catalogued mistakes no longer apply to t02_linear.py" per file, one line each."""
    return [f"{count} catalogued mistake{'s' if count > 1 else ''} no longer appl{'y' if count > 1 else 'ies'} "
            f"to {where} (its text changed): {'they are' if count > 1 else 'it is'} not tried"
            for where, count in sorted(stale.items())]


def of_functions(functions):
    """The catalogued mistakes in any of ``functions`` (paths under npformer)."""
    wanted = set(functions)
    return [m for m in CATALOGUE if m.function in wanted]


def agreeing_mistakes(failures):
    """Choose each failure's mistake so the failures agree: several mistakes may fit one check
    (assigning and fancy-index adding give the same rows after one backward pass), and the one
    that fits every failing check of the same function is the one to name. ``failures``: records
    with ``matches`` (candidates, in catalogue order) and ``mistake``, set in place: the failing
    checks that were compared with the catalogue (a property is not).

    A failure no catalogued mistake explains means the code computes something none of them
    does (or holds two mistakes, one of them unknown): then nothing is named, since a mistake
    that fits some checks but not that one is not what the code does. When the catalogue leaves
    a failure unexplained, or explains the failures by mistakes in different functions, the
    structural mistakes (``structure``) each failure defers are asked for too, once."""
    _choose(failures)
    if all(f.mistake is not None for f in failures) and len({f.mistake.function for f in failures}) <= 1:
        return
    asked = False
    for failure in failures:
        ask = getattr(failure, "deferred", None)
        if ask is not None:
            failure.matches = list(failure.matches) + [m for m in ask() if m not in failure.matches]
            failure.deferred, asked = None, True
    if asked:
        _choose(failures)


def _choose(failures):
    if any(not failure.matches for failure in failures):
        for failure in failures:
            failure.mistake = None
        return
    by_function = {}
    for failure in failures:
        names = {m.function for m in failure.matches}
        if len(names) == 1:
            fits = set(failure.matches)
            function = names.pop()
            by_function[function] = by_function.get(function, fits) & fits
    for failure in failures:
        if failure.matches:
            agreed = [m for m in failure.matches if m in by_function.get(m.function, ())]
            failure.mistake = (agreed or failure.matches)[0]


PAIRS_AT_MOST = 300              # pairs of one function's mistakes tried when no single one fits


def _edits(found):
    return (found.old, found.new) if isinstance(found.old, tuple) else ((found.old,), (found.new,))


def pairs(candidates):
    """Two mistakes made in one function at once, as one Mistake each: every pair of
    ``candidates`` of the same function whose edits both still apply, for code that no single
    mistake explains (two wrong lines of AdamW). Its ``says`` gives each one's hint. At most
    ``PAIRS_AT_MOST`` pairs per function are formed (none beyond: a search too wide to be quick)."""
    by_function = {}
    for found in candidates:              # a mistake, or (mistake, its patches)
        found = found[0] if isinstance(found, tuple) else found
        by_function.setdefault(found.function, []).append(found)
    made = []
    for function, found in by_function.items():
        count = len(found) * (len(found) - 1) // 2
        if count > PAIRS_AT_MOST:
            continue
        for i, first in enumerate(found):
            for second in found[i + 1:]:
                (old_a, new_a), (old_b, new_b) = _edits(first), _edits(second)
                if set(old_a) & set(old_b):                # both edit one line: not two mistakes
                    continue
                both = Mistake(f"{first.name} + {second.name}", function, old_a + old_b, new_a + new_b,
                               f"two mistakes here: {first.says}; and {second.says}", first.recheck)
                try:
                    both.patches()
                except (ValueError, SyntaxError):         # one edit spoils the other's text
                    continue
                made.append(both)
    return made

