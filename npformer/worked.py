"""The worked examples, found and loaded: the numbers the tutorial computes by hand, and
claims it makes in words, recomputed by npformer (run by ``npformer examples``, drawn by
``npformer.pictures``, checked by the tests).

The scripts live in the repository's top-level ``worked_examples/`` folder
(``01_token_vectors.py``, ``02_attention_by_hand.py`` ...), one per section of
the tutorial in the order it teaches them. Each defines ``run(out=print)``
returning a dict of its key numbers, so the tests can check them against the
tutorial's figures.

The folder stays at the repository's top for readers; an install ships a copy inside
the package as ``npformer/worked_examples/`` (setup.py maps it there). The folder is
therefore looked for inside the package (an install), beside it (a source checkout or
an editable install), then in the current directory and its parents; ``--dir`` names
it explicitly. A folder or a name that cannot be found raises ``ExampleNotFound`` (a
``LookupError``).

The command ``npformer examples`` (npformer/cli/examples.py) runs them:

    npformer examples              run every example
    npformer examples 2            run one, by number ...
    npformer examples rope         ... or by a fragment of its name
    npformer examples --list       list them with one line each
"""
from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np


FOLDER = "worked_examples"
_PACKAGE_DIR = Path(__file__).resolve().parent      # npformer/, wherever it is installed
_SCRIPT_NAME = re.compile(r"^(\d\d)_(\w+)\.py$")


class ExampleNotFound(LookupError):
    """The worked examples folder, or the example asked for, cannot be found."""


# -- the helper the scripts print with ------------------------------------------------
def vec(x, digits=3):
    """An array printed like the tutorial writes it: ``[1.340, 1.321]``, ``digits`` decimals
    (``digits=0``: whole numbers, ``[2, 0]``)."""
    x = np.asarray(x, dtype=np.float64)
    if digits == 0:
        return np.array2string(np.rint(x).astype(np.int64), separator=", ", max_line_width=100)
    return np.array2string(x, precision=digits, separator=", ",
                           floatmode="fixed", suppress_small=True, max_line_width=100)


# -- finding the scripts -----------------------------------------------------------------
@dataclass(frozen=True)
class Example:
    """One worked example script: its number, its name and its file."""

    number: int
    name: str
    path: Path

    @property
    def stem(self):
        """The file name without ``.py``, e.g. ``02_attention_by_hand``."""
        return self.path.stem

    def summary(self):
        """The first line of the script's docstring (read without running the script)."""
        doc = ast.get_docstring(ast.parse(self.path.read_text(encoding="utf-8")))
        return doc.strip().splitlines()[0] if doc else ""

    def load(self):
        """Import the script as a module (its ``run`` is not called)."""
        spec = importlib.util.spec_from_file_location(f"worked_examples_{self.stem}", self.path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


def _has_examples(folder):
    return folder.is_dir() and any(_SCRIPT_NAME.match(p.name) for p in folder.iterdir())


def find_examples_dir(explicit=None, cwd=None):
    """The ``worked_examples/`` folder: ``explicit``, else inside the package, else beside it,
    else in ``cwd`` or one of its parents. Raises ``ExampleNotFound`` (saying where it looked)
    if absent."""
    if explicit is not None:
        folder = Path(explicit)
        if not _has_examples(folder):
            raise ExampleNotFound(f"--dir: expected a folder holding NN_name.py worked examples, "
                             f"got {str(folder)!r}")
        return folder
    cwd = Path.cwd() if cwd is None else Path(cwd)
    candidates = [_PACKAGE_DIR / FOLDER, _PACKAGE_DIR.parent / FOLDER]
    candidates += [d / FOLDER for d in (cwd, *cwd.parents)]
    for folder in candidates:
        if _has_examples(folder):
            return folder
    raise ExampleNotFound(f"the {FOLDER}/ folder was not found in the package ({_PACKAGE_DIR}), "
                          f"beside it, nor in {cwd} or its parents; reinstall npformer "
                          f"(pip install .) or pass --dir PATH")


def list_examples(folder):
    """Every ``NN_name.py`` in ``folder``, sorted by number."""
    found = []
    for path in sorted(Path(folder).iterdir()):
        match = _SCRIPT_NAME.match(path.name)
        if match:
            found.append(Example(int(match.group(1)), match.group(2), path))
    return found


def select(examples, wanted):
    """The one example ``wanted`` names: a number (``2`` or ``02``) or a fragment of a name.

    Raises ``ExampleNotFound`` when nothing, or more than one example, matches.
    """
    wanted = wanted.strip().lower()
    if wanted.isdigit():
        matches = [e for e in examples if e.number == int(wanted)]
    else:
        matches = [e for e in examples if wanted in e.stem.lower()]
        exact = [e for e in matches if e.name.lower() == wanted or e.stem.lower() == wanted]
        matches = exact or matches
    names = ", ".join(e.stem for e in examples)
    if not matches:
        raise ExampleNotFound(f"no worked example matches {wanted!r}; expected a number or a part "
                         f"of one of: {names}")
    if len(matches) > 1:
        raise ExampleNotFound(f"{wanted!r} matches several worked examples "
                         f"({', '.join(e.stem for e in matches)}); be more specific")
    return matches[0]


def run_example(example, out=print):
    """Import one script and call its ``run(out)``; returns the dict of key numbers."""
    out(f"== {example.stem}: {example.summary()}")
    values = example.load().run(out)
    out("")
    return values
