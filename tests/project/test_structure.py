"""The package stays walkable: no import cycle, functions that fit on a screen, and the speed
idioms in the fast track (figures by tests/support/structure_figures.py).

Files have no cap on their length: a file holds one concept, whatever its length, and a cap
on lines split files by size rather than by idea. A function has one: it does one thing."""
import ast
from pathlib import Path

import pytest

from support.structure_figures import cycles, file_figures, import_graph, in_fast_track, speed_idioms

PACKAGE = Path(__file__).resolve().parents[2] / "npformer"
FILES = sorted(PACKAGE.rglob("*.py"))
MAX_FUNCTION, MAX_PLAIN_IDIOMS = 60, 12


def test_no_import_cycle():
    assert cycles(import_graph(PACKAGE)) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import thing\n")
    (package / "b.py").write_text("def f():\n    from . import a\n")      # a function-level import
    (package / "c.py").write_text("from . import a\n")
    assert cycles(import_graph(package)) == [["pkg.a", "pkg.b"]]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_function_fits_on_a_screen(path):
    _, longest, name, _ = file_figures(path)
    assert longest <= MAX_FUNCTION, f"{name}: {longest} lines"


def test_speed_idioms_stay_in_the_fast_track():
    outside = {str(p.relative_to(PACKAGE)): file_figures(p)[3] for p in FILES
               if not in_fast_track(PACKAGE, p)}
    outside = {name: idioms for name, idioms in outside.items() if idioms}
    assert sum(len(idioms) for idioms in outside.values()) <= MAX_PLAIN_IDIOMS, outside


def test_what_counts_as_a_speed_idiom():
    source = ("np.exp(x, out=x)\nnp.copyto(a, b)\nx *= 2\nx /= 2\nx -= 1\np.data -= lr * g\n"
              "p.grad += g\ny = x * 2\n")
    assert [text for _, text in speed_idioms(ast.parse(source))] == [
        "out=", "np.copyto", "x *= 2", "x /= 2", "x -= 1"]
