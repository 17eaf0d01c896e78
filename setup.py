"""The package layout pyproject.toml cannot express: the worked examples stay at the
repository's top (``worked_examples/``, where readers and links find them) and ship inside
the installed package as ``npformer/worked_examples/``, so ``npformer examples`` runs them
from any install. Everything else about the project is in pyproject.toml."""
from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["npformer*"]) + ["npformer.worked_examples"],
    package_dir={"npformer.worked_examples": "worked_examples"},
    package_data={"npformer": ["py.typed"], "npformer.worked_examples": ["*.md"],
                  "npformer.specs": ["*.json"]},    # the catalogue of mistakes is data, beside each spec
)
