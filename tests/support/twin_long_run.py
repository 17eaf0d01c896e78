"""The long differential run of the fast twins, outside pytest: many draws per pair.

    python tests/support/twin_long_run.py --draws 5000            # every pair, 5,000 valid draws each
    python tests/support/twin_long_run.py --draws 200 softmax     # one pair

Each pair runs ``twin_check.check_twins`` on hypothesis draws (``twin_pairs.CASES``) until
``--draws`` of them were inputs the plain function accepts; a mismatch stops that pair with
hypothesis's shrunk example. Prints per pair the draws checked, those the plain function
refused, the seconds, and "ok" or the failure; exits 1 if any pair failed.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS, os.path.dirname(TESTS)]

from hypothesis import HealthCheck, Phase, given, seed as hypothesis_seed, settings  # noqa: E402
from hypothesis.errors import UnsatisfiedAssumption  # noqa: E402

from support import twin_check  # noqa: E402
from support.twin_pairs import CASES  # noqa: E402


def run_pair(pair, draws, seed):
    """(checked, refused, failure or None) of ``draws`` valid draws of one pair."""
    counts = {"checked": 0, "refused": 0}

    def counted(case):
        try:
            twin_check.check_twins(case)
        except UnsatisfiedAssumption:
            counts["refused"] += 1
            raise
        counts["checked"] += 1

    test = settings(max_examples=draws, deadline=None, database=None, derandomize=seed is None,
                    phases=[Phase.generate, Phase.shrink],
                    suppress_health_check=list(HealthCheck))(given(CASES[pair])(counted))
    if seed is not None:
        test = hypothesis_seed(seed)(test)
    try:
        test()
    except Exception as error:            # a mismatch, shrunk by hypothesis
        return counts["checked"], counts["refused"], error
    return counts["checked"], counts["refused"], None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pairs", nargs="*", help="pairs to run (default: all)")
    parser.add_argument("--draws", type=int, default=5000, help="valid draws per pair (5000)")
    parser.add_argument("--seed", type=int, default=None,
                        help="hypothesis seed (default: derandomized, the same draws every run)")
    args = parser.parse_args(argv)
    failed = []
    for pair in args.pairs or sorted(CASES):
        began = time.perf_counter()
        checked, refused, error = run_pair(pair, args.draws, args.seed)
        verdict = "ok" if error is None else f"FAILED: {str(error).splitlines()[0]}"
        print(f"{pair:18s} {checked:6d} checked {refused:6d} refused {time.perf_counter() - began:7.1f} s  "
              f"{verdict}", flush=True)
        if error is not None:
            failed.append(pair)
            print(error, file=sys.stderr)
    print(f"{len(failed)} pair(s) failed" + (f": {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
