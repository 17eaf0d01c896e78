"""The catalogue of mistakes learners make, one small wrong version of a function each.

``of_functions(paths)`` gives the mistakes of some of npformer's functions; a mistake's
``patches()`` puts its wrong version in place (``patching.patched``). The grader and
``conform`` compare the code under test with each of them on the same inputs and name the
one that computes the same numbers. The mistakes are data (``registry``): one JSON file per
concept file, beside its spec (``npformer/specs/t05_rope.json``).
"""
from .registry import CATALOGUE, Mistake, of_functions, pairs, agreeing_mistakes  # noqa: F401
