"""One spec per concept: every concept file has one, and every name a spec gives resolves.

The engines read components, cases, exercises and mistakes from ``npformer.specs`` alone; a
spec naming a function that does not exist would only fail when some engine reached it. These
tests read the package's files and the registry independently of the engines.
"""
import dataclasses
import importlib
import json
import os
import re

import pytest

import npformer
from npformer.specs import COMPONENTS, EXERCISES, LAYERS, SPECS, Component, Exercise
from npformer.specs.registry import module_path

PACKAGE = os.path.dirname(os.path.abspath(npformer.__file__))
CONCEPT_FILE = re.compile(r"t\d\d_\w+\.py$")


def concept_files():
    """The concept files: npformer/tNN_name.py."""
    return sorted(name for name in os.listdir(PACKAGE) if CONCEPT_FILE.match(name))


def resolves(path):
    """True when "t03_softmax.softmax_backward" (or "Class.method") names something callable."""
    parts = path.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            found = importlib.import_module(f"npformer.{'.'.join(parts[:split])}")
        except ModuleNotFoundError:
            continue
        for name in parts[split:]:
            found = getattr(found, name, None)
        return callable(found)
    return False


def unresolved(components, exercises):
    """Every dotted name the given components and exercises declare that names nothing."""
    names = []
    for component in components:
        names += [n for n in component.reference if isinstance(n, str)] + list(component.functions)
    for exercise in exercises:
        names += [module_path(spec) for spec in exercise.functions(forward=True)]
    return [name for name in names if not resolves(name)]


def test_every_concept_file_has_exactly_one_spec():
    declared = [spec.concept for spec in SPECS]
    assert len(declared) == len(set(declared))
    assert [f for f in concept_files() if f not in declared] == []
    assert len(concept_files()) >= 20 and {"t05_rope.py", "t19_optim.py", "t21_alibi.py"} <= set(declared)


def test_every_spec_names_a_file_that_exists():
    assert [s.concept for s in SPECS if not os.path.isfile(os.path.join(PACKAGE, s.concept))] == []


def test_every_function_a_spec_names_exists():
    assert unresolved(list(COMPONENTS.values()) + list(LAYERS.values()), EXERCISES) == []


def test_a_spec_naming_a_missing_function_is_found():
    softmax = COMPONENTS["softmax"]
    wrong = dataclasses.replace(softmax, reference=("t03_softmax.softmax_forward", "t03_softmax.softmax_backwards"))
    exercise = Exercise(99, "x", "x", "x", backward=("t08_norm.py:LayerNorm.backwardz",))
    assert unresolved([wrong], [exercise]) == ["t03_softmax.softmax_backwards", "t08_norm.LayerNorm.backwardz"]


def test_every_component_and_layer_says_which_concept_declares_it():
    for component in list(COMPONENTS.values()) + list(LAYERS.values()):
        assert isinstance(component, Component) and component.concept in [s.concept for s in SPECS], component.name


def test_exercise_numbers_are_unique_and_each_exercise_s_files_exist():
    numbers = [e.number for e in EXERCISES]
    assert len(numbers) == len(set(numbers))
    for exercise in EXERCISES:
        for file in exercise.files(forward=True):
            assert os.path.isfile(os.path.join(PACKAGE, file)), (exercise.label, file)


@pytest.mark.parametrize("spec", [s for s in SPECS if os.path.exists(s.mistakes)], ids=lambda s: s.concept)
def test_every_catalogued_mistake_edits_a_function_of_the_package(spec):
    with open(spec.mistakes, encoding="utf-8") as f:
        mistakes = json.load(f)
    assert mistakes, spec.mistakes
    module = spec.concept[:-3].replace("/", ".")
    assert [m["name"] for m in mistakes if not resolves(f"{module}.{m['function']}")] == []
