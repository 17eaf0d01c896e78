"""The package as a user gets it: a wheel built from the tree, installed in a fresh virtual
environment outside the tree, run from another directory; and what runs without hypothesis
(an extra, ``[verify]``), what refuses without it in one line naming the extra."""
import os
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import npformer
from support.venvs import fresh_venv

try:
    import tomllib
except ModuleNotFoundError:          # Python 3.10: the test extra brings tomli, the same parser
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]

# A finder that hides hypothesis from a child process, as on a machine without the extra.
HIDE_HYPOTHESIS = """
import sys
class _Hidden:
    def find_spec(self, name, path=None, target=None):
        if name == "hypothesis" or name.startswith("hypothesis."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _Hidden())
"""


def _project():
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def _without_hypothesis(tmp_path, *args, cwd=None):
    (tmp_path / "hide").mkdir(exist_ok=True)
    (tmp_path / "hide" / "sitecustomize.py").write_text(HIDE_HYPOTHESIS, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "hide"), str(REPO)])}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=cwd or tmp_path, timeout=300)


def test_hypothesis_is_an_extra_not_a_dependency():
    """So is pyseccomp, with which the grader builds its seccomp filter (Linux only)."""
    project = _project()
    assert not any(r.startswith(("hypothesis", "pyseccomp")) for r in project["dependencies"])
    assert project["optional-dependencies"]["verify"] == ["hypothesis>=6", "pyseccomp>=0.1.2; sys_platform == 'linux'"]
    assert "hypothesis>=6" in project["optional-dependencies"]["test"]


def test_the_test_extra_holds_every_package_a_main_suite_test_would_skip_without():
    # test_interop_files skips without safetensors, test_plot without the plot extra
    test = _project()["optional-dependencies"]["test"]
    for needed in ("safetensors", "matplotlib", "noto-cjk-sans-otc==0.0.1", "pytest-xdist>=3"):
        assert needed in test


def test_import_training_and_examples_run_without_hypothesis(tmp_path):
    run = _without_hypothesis(tmp_path, "-c", "import sys, npformer, npformer.cli, npformer.cli.demo, "
                              "npformer.training.loop, npformer.testing; "
                              "assert 'hypothesis' not in sys.modules; print(npformer.__version__)")
    assert run.returncode == 0 and run.stdout.strip() == npformer.__version__, run.stderr
    ran = _without_hypothesis(tmp_path, "-m", "npformer", "examples", "02")
    assert ran.returncode == 0 and "[1.340, 1.321]" in ran.stdout, ran.stderr


@pytest.mark.parametrize("command, what", [
    (["-m", "npformer", "conform", "--component", "softmax", "mine.py:softmax"], "npformer.testing.conform"),
    (["-m", "npformer", "grade", "workspace"], "npformer grade"),
    (["-c", "from npformer.testing import strategies"], "npformer.testing.strategies"),
])
def test_what_needs_hypothesis_says_so_in_one_line_naming_the_extra(tmp_path, command, what):
    (tmp_path / "mine.py").write_text("def softmax(x, axis=-1):\n    return x\n", encoding="utf-8")
    if "grade" in command:
        from npformer.exercises.workspace import write_workspace
        write_workspace(str(tmp_path / "workspace"), solutions=True)
    run = _without_hypothesis(tmp_path, *command)
    assert run.returncode == (2 if "-m" in command else 1)      # a command: 2, as for bad input
    said = run.stderr.strip().splitlines()
    expected = (f"{what} needs hypothesis (npformer's [verify] extra), which is not installed: "
                f"pip install 'hypothesis>=6'")
    assert said[-1].endswith(expected), run.stderr
    if "-m" in command:
        assert len(said) == 1 and said[0].startswith(f"npformer {command[2]}: error: "), said


def test_the_version_is_written_once():
    project = _project()
    assert "version" not in project and "version" in project["dynamic"]
    sources = [p for p in REPO.glob("npformer/**/*.py") if f'"{npformer.__version__}"' in p.read_text(encoding="utf-8")]
    assert sources == [REPO / "npformer" / "__init__.py"], sources


def test_no_typing_is_claimed_that_the_code_does_not_hold():
    """Few public functions are annotated, and no type checker runs: neither py.typed nor the
    "Typing :: Typed" classifier may say otherwise."""
    assert not (REPO / "npformer" / "py.typed").exists()
    assert not any(c.startswith("Typing ::") for c in _project()["classifiers"])


def _wheel(tmp_path):
    """A wheel built from the tree: (its path, its file names with their modes, its metadata)."""
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist),
                            str(REPO)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = dist.glob("npformer-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
        info = next(n for n in modes if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(info).decode("utf-8"))
    return wheel, modes, metadata


@pytest.mark.full
def test_the_wheel_installs_in_a_fresh_venv_and_runs_from_elsewhere(tmp_path):
    wheel, modes, metadata = _wheel(tmp_path)
    assert wheel.name.startswith(f"npformer-{npformer.__version__}-py3-none-any")
    assert "npformer/specs/t02_linear.json" in modes     # the catalogue of mistakes
    assert "npformer_command.py" in modes                # the console script's entry
    assert any(n.startswith("npformer/worked_examples/02_") for n in modes)
    # the Gradescope recipe, its two scripts executable
    for name, executable in (("setup.sh", True), ("run_autograder", True), ("Dockerfile", False)):
        mode = modes[f"npformer/exercises/gradescope/{name}"]
        assert bool(mode & 0o111) == executable, (name, oct(mode))
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in modes)
    assert metadata["License"] == "MIT" and metadata["License-File"] == "LICENSE"
    assert metadata["Version"] == npformer.__version__
    requires = metadata.get_all("Requires-Dist")
    assert "hypothesis>=6; extra == \"verify\"" in requires
    assert not any(r.startswith("hypothesis") and "extra" not in r for r in requires), requires
    assert {"verify", "test", "hf", "plot", "crosscheck"} <= set(metadata.get_all("Provides-Extra"))

    venv, python = fresh_venv(tmp_path)
    # --ignore-installed: this environment's npformer, which the venv sees too, is not the wheel
    installed = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                                "--ignore-installed", str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}

    def run(*argv):
        ran = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=elsewhere, env=env,
                             timeout=300)
        assert ran.returncode == 0, ran.stderr[-2000:]
        return ran.stdout

    version, where, recipe = run(python, "-c", "import npformer, sys, importlib.resources as r; "
                                 "print(npformer.__version__); print(npformer.__file__); "
                                 "print(r.files('npformer.exercises') / 'gradescope')").split()
    assert version == npformer.__version__ and where.startswith(str(venv)), where
    assert os.access(os.path.join(recipe, "run_autograder"), os.X_OK), recipe
    bin_dir = python.parent
    assert "[1.340, 1.321]" in run(bin_dir / "npformer", "examples", "02")
    assert run(bin_dir / "npformer", "--version").strip() == f"npformer {npformer.__version__}"
    assert "\nLicense: MIT\n" in run(python, "-m", "pip", "show", "npformer")


def test_the_changelog_has_an_unreleased_section_and_an_entry_for_this_version():
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("## [")]
    assert headings[0] == "## [Unreleased]"
    assert any(h.startswith(f"## [{npformer.__version__}] - ") for h in headings), headings
    citation = (REPO / "CITATION.cff").read_text(encoding="utf-8")
    assert citation.startswith("cff-version: 1.2.0\n") and "\nlicense: MIT\n" in citation


def test_the_install_hints_name_the_extras_own_packages_not_npformer_on_pypi():
    """A copy installed from its folder is not on PyPI: "pip install 'npformer[plot]'" would fail
    there; the packages themselves install wherever npformer came from."""
    from npformer.pictures.plot import CJK_HINT, INSTALL_HINT
    from npformer.testing.needs import INSTALL as VERIFY_INSTALL
    extras = _project()["optional-dependencies"]
    assert INSTALL_HINT.startswith(f"pip install {' '.join(extras['plot'])} ")
    assert f"pip install {extras['plot'][1]} " in CJK_HINT
    assert VERIFY_INSTALL == f"pip install '{extras['verify'][0]}'"
    sources = [p for p in REPO.glob("npformer/**/*.py") if "npformer[" in p.read_text(encoding="utf-8")]
    assert sources == []
