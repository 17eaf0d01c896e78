"""What pyproject.toml cannot express.

The worked examples stay at the repository's top (``worked_examples/``, where readers and
links find them) and ship inside the installed package as ``npformer/worked_examples/``, so
``npformer examples`` runs them from any install. The Gradescope recipe
(``npformer/exercises/gradescope/``: setup.sh, run_autograder, Dockerfile) is a folder of
files, not a package, and ships as the exercises package's data. ``npformer_command.py``, the
console script's entry point, is a module beside the package (its docstring says why).

The licence is the core metadata's ``License`` field, which every pip's ``pip show`` prints;
``project.license = "MIT"`` would write only ``License-Expression``, which the pips that Python
3.10 to 3.13 bring do not show (their ``License:`` line stays empty). LICENSE itself ships in the
wheel (``license-files`` in pyproject.toml). Everything else is in pyproject.toml."""
from setuptools import find_packages, setup

setup(
    license="MIT",
    packages=find_packages(include=["npformer*"]) + ["npformer.worked_examples"],
    py_modules=["npformer_command"],           # the console script's entry: see its docstring
    package_dir={"npformer.worked_examples": "worked_examples"},
    package_data={"npformer.worked_examples": ["*.md"],
                  "npformer.exercises": ["gradescope/*"],
                  "npformer.specs": ["*.json"]},    # the catalogue of mistakes is data, beside each spec
)
