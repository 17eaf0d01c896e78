"""Check the fourth held-out set: run from the repository root as

    python tests/data/heldout4/check.py [-v] [ID ...]

What it checks, entry by entry, is in ``tests/support/heldout_harness.py``. This set's rules on
the whole: at least 170 mistakes, at least 6 for every exercise with bodies to
write, about two thirds of them backward (between 60% and 75%); the scenarios are set 3's,
unchanged, and every mistake of this set shows in them.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "support"))

from heldout_harness import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], HERE, (170, 6, (0.6, 0.75))))
