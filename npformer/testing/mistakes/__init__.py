"""The catalogue of mistakes learners make, one small wrong version of a function each.

``of_functions(paths)`` gives the mistakes of some of npformer's functions; a mistake's
``patches()`` puts its wrong version in place (``patching.patched``). The grader and
``conform`` compare the code under test with each of them on the same inputs and name the
one that computes the same numbers. The modules follow the files they are about.
"""
from . import (activations, attention, blocks, embedding, encoders, ffn,  # noqa: F401  (each adds its mistakes)
               flash, kv_cache, linear, moe, norm, rope, softmax, training)
from .registry import CATALOGUE, Mistake, mistake, of_functions, pairs, settle  # noqa: F401
