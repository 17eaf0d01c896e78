"""The test tiers say what did not run: the cross-check tier refuses to start without its
packages (one line naming the install command), the main suite names every skip's reason
and the tier it left out."""
import subprocess
import sys
from pathlib import Path

import pytest

from support import crosscheck_packages
from support.crosscheck_packages import INSTALL as CROSSCHECK_INSTALL

REPO = Path(__file__).resolve().parents[2]


def _pytest(args, hide=()):
    """Run pytest in a fresh process from the repository, with the modules ``hide`` not found."""
    code = ("import importlib.util as u, sys, pytest; found = u.find_spec; "
            f"u.find_spec = lambda name, *a: None if name in {tuple(hide)!r} else found(name, *a); "
            "sys.exit(pytest.main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, "-p", "no:cacheprovider", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def test_the_crosscheck_tier_without_its_packages_fails_naming_the_install_command():
    run = _pytest(["-q", "-m", "crosscheck"], hide=("torch",))
    assert run.returncode != 0
    said = [line for line in (run.stdout + run.stderr).splitlines() if line.strip()]
    assert len(said) == 1 and "torch" in said[0] and CROSSCHECK_INSTALL in said[0], said


def test_the_docs_and_ci_install_what_the_tier_asks_for():
    readme = (REPO / "docs" / "training-and-files.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")
    with open(REPO / "pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert f"needs `{crosscheck_packages.PACKAGES}`" in readme
    assert CROSSCHECK_INSTALL in ci.splitlines()
    assert extras["crosscheck"] == list(crosscheck_packages.EXTRA)


def test_ci_runs_the_readme_command_and_the_full_tier():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "pip install '.[test]' && python -m pytest -q -n auto" in ci
    assert any(line.startswith("python -m pytest -q -n auto -m full") for line in ci), ci


def test_the_main_suite_names_each_skips_reason_and_the_tier_it_left_out(tmp_path):
    (tmp_path / "test_left_out.py").write_text(
        "import pytest\n\n\ndef test_needs_something():\n"
        "    pytest.skip('needs a thing this machine lacks')\n", encoding="utf-8")
    run = _pytest(["-c", "pyproject.toml", "-q", "tests/verify/test_tables.py",
                   str(tmp_path / "test_left_out.py")])
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert any(line.startswith("SKIPPED [1]") and line.endswith("needs a thing this machine lacks")
               for line in lines), lines
    assert any(line.startswith("not run here: the cross-check tier") for line in lines), lines
