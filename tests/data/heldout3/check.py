"""Check the third held-out set: run from the repository root as

    python tests/data/heldout3/check.py [-v] [ID ...]

It writes an answer key (``npformer exercises DIR --solutions --forward``) to a temporary
directory, then, for every entry of mistakes.json and alternatives.json:

- the place: the file and function are one of the exercise's bodies in the catalog, the
  kind matches (a backward body or a forward one), ``old`` occurs exactly once in the key's
  file and lies inside the named function (an alternative's ``body`` replaces that whole
  ``def``, which it must define again under the same name);
- the edited file compiles;
- the edit runs: a copy of npformer whose key files are the answer key's, with the one
  file edited, is imported afresh and the exercise's scenarios run on it (float64 unless a
  scenario says otherwise, fixed seeds, gradients of the inputs and of every parameter,
  outputs, caches that matter). A mistake must run every ordinary scenario without raising
  and give different numbers (relative difference > 1e-7, or a different shape, or NaN
  where the key has a number) in at least one scenario; when it differs only in special
  scenarios (masks with empty rows, padding, GQA, ignored targets, custom scales, windows,
  repeated ids, more than one layer, accumulated gradients ...) it must carry a ``note``.
  An alternative must match the key in every scenario to 1e-10 (relative to the largest
  value of each array; float32 scenarios to 1e-5).

And the set as a whole: at least 90 mistakes, at least 4 for every exercise with bodies to
write, about two thirds of them backward, at least two alternatives for each of the twelve
functions that need them.

One summary line at the end; the exit status is 0 when every rule holds.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from heldout_harness import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], HERE, (90, 4, (0.55, 0.8))))
