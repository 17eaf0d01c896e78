"""The test tiers say what did not run: the cross-check tier refuses to start without its
packages (one line naming the install command), the main suite names every skip's reason
and the tier it left out."""
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:          # Python 3.10: the test extra brings tomli, the same parser
    import tomli as tomllib

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
    with open(REPO / "pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert f"needs `{crosscheck_packages.PACKAGES}`" in readme
    assert f"step \"{CROSSCHECK_INSTALL}\"" in ci.splitlines()
    assert extras["crosscheck"] == list(crosscheck_packages.EXTRA)


def readme_commands():
    """The quick start's commands: the lines of the first bash block of README.md."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_ci_runs_the_readme_commands_in_a_fresh_venv_then_the_other_tiers():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    steps = [line.split('"', 1)[1].rsplit('"', 1)[0] for line in ci.splitlines() if line.startswith("step ")]
    assert readme_commands() == ["pip install . && npformer demo",
                                 "pip install '.[test]' && python -m pytest -q -n auto"]
    assert steps[:2] == readme_commands(), steps
    assert steps[2].startswith("python -m pytest -q -n auto -m full"), steps
    assert steps[3] == CROSSCHECK_INSTALL and steps[4].endswith("python -m pytest -q -m crosscheck"), steps
    # the venv is made (and entered) before the first step, from the system's python3
    made = ci.index('"${PYTHON:-python3}" -m venv "$scratch/venv"')
    assert made < ci.index('source "$scratch/venv/bin/activate"') < ci.index("\nstep ")


def test_ci_fails_when_a_step_fails_and_still_runs_the_steps_after_it(tmp_path):
    """.ci/run's step function, run with a failing and a passing command: exit 1, both ran."""
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    begin, end = ci.index("failed=()"), ci.index('step "')
    ending = ci[ci.index("if ((${#failed[@]}))"):]
    script = "set -uo pipefail\n" + ci[begin:end] + 'step "false"\nstep "echo second"\n' + ending
    ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "== FAILED after" in ran.stdout and "second\n== passed" in ran.stdout and "failed: false" in ran.stdout


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
