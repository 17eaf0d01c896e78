"""Generation (``t12_generate.py``), as the engines know it: nothing to draw, check or hand out.

Choosing the next token and generating text compute no gradient and hold no body a learner
writes (there is no exercise 12); their facts are tests of the library (tests/concepts/test_generate.py).
"""
from __future__ import annotations

from .registry import Spec

spec = Spec("t12_generate.py")
