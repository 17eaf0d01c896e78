"""What ``conform`` and ``conform_module`` say of code in published conventions: every stranger of
tests/verify/test_conform_conventions.py, correct and with its one slip, one line each.

    python tests/support/convention_figures.py [--only gemma]

For a correct implementation the line gives the verdict and whether it is the one wanted (the
convention named); for its slip, whether it was caught, and what the report names (a catalogued
mistake) or locates (the check or sub-module that differs). The last lines count them.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "verify")]


def _component(t, case):
    component, _, _, expected, slip, _ = t.COMPONENT_CASES[case]
    right, wrong = t.run_component(case), t.run_component(case, slip)
    fine = right.verdict == "conforms under convention" and right.convention == expected
    names = t.named(wrong)
    said = [f"{n} (the convention, not the slip)" if set(n.split(" + ")) & t.CONVENTION_AS_MISTAKE.get(component, set())
            else n
            for n in sorted(names)] or [f"located: {', '.join(c.name for c in wrong.failures)[:70]}"]
    return fine, right.summary()[:90], not wrong.ok, said


def _module(t, case):
    wanted, slip = t.MODULE_CASES[case][4], t.MODULE_CASES[case][5]
    try:
        right = t.run_module(case)
        fine, verdict = right.verdict == wanted, right.verdict
    except Exception as error:                 # noqa: BLE001 - what a user meets is the figure
        fine, verdict = False, f"raised {type(error).__name__}: {str(error)[:70]}"
    try:
        wrong = t.run_module(case, slip)
        caught = wrong.verdict == "does not conform"
        differ = [p.ours for p in wrong.parts if p.differs]
        said = [wrong.mistake.name] if wrong.mistake is not None else [f"located: {differ}"] if differ else \
            ["located: how the parts are joined (each agrees alone)"] if any(q.worst for q in wrong.parts) else \
            ["no part located: none was handed in to run alone"]
    except Exception as error:                 # noqa: BLE001
        caught, said = False, [f"raised {type(error).__name__}"]
    return fine, verdict, caught, said


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import test_conform_conventions as t
    start, rows = time.time(), []
    cases = [("component", c) for c in sorted(t.COMPONENT_CASES)] + [("module", c) for c in sorted(t.MODULE_CASES)]
    for level, case in cases:
        if args.only and args.only not in case:
            continue
        fine, verdict, caught, said = (_component if level == "component" else _module)(t, case)
        rows.append((fine, caught, said))
        print(f"{case:28s} {'right' if fine else 'WRONG'}: {verdict}")
        print(f"{'':28s} slip {'caught' if caught else 'NOT CAUGHT'}: {'; '.join(said)}")
    right = sum(r[0] for r in rows)
    named = sum(r[1] and not r[2][0].startswith(("located", "raised", "no part")) and "not the slip" not in r[2][0] for r in rows)
    located = sum(r[1] and r[2][0].startswith("located") for r in rows)
    print(f"{len(rows)} correct implementations: {right} judged right, {len(rows) - right} called wrong; "
          f"{len(rows)} slips: {sum(r[1] for r in rows)} caught, {named} named, {located} located only; "
          f"{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
