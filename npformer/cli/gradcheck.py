"""``npformer gradcheck``: every registered component, its worst relative error, pass or fail."""
from __future__ import annotations

import numpy as np

import npformer

from ..core.module import Module
from ..testing.cases import CASES, in_tutorial_order
from ..testing.gradcheck import gradcheck
from .common import positive_number


# Public names that have nothing to differentiate, and why.
NOTHING_TO_CHECK = {
    "SinusoidalPositions": "a fixed table looked up by integer positions: no float input, no parameter",
    "Module": "the abstract base class",
    "Cache": "a record, not a computation",
}


def public_components():
    """Every public Module subclass and function pair exported by ``npformer``."""
    names = {name for name, obj in vars(npformer).items()
             if isinstance(obj, type) and issubclass(obj, Module) and not name.startswith("_")}
    # function pairs: every exported ``f_forward`` with an exported ``f_backward``
    names |= {name[:-len("_forward")] for name in vars(npformer)
              if name.endswith("_forward") and name[:-len("_forward")] + "_backward" in vars(npformer)}
    return sorted(names - set(NOTHING_TO_CHECK))


def missing_cases():
    """Public components without a registered gradient-check case (should be [])."""
    return [name for name in public_components() if name not in CASES]


def run_all(sizes=(0, 1, 2), tol=1e-6, say=print):
    """Check every case at every size; ``say`` each row of the table; return {name: worst relative error}."""
    worst = {}
    width = max(len(name) for name in list(CASES) + missing_cases() + ["component"])
    say(f"{'component':{width}} {'tensors':>8} {'worst rel. error':>17}  worst tensor")
    for name in in_tutorial_order(CASES):
        builder = CASES[name]
        err, where, count = 0.0, "", 0
        for size in sizes:
            target, inputs, options = builder(np.random.default_rng(size), size)
            report = gradcheck(target, *inputs, tol=tol, **options)
            count += len(report.checks)
            if report.worst is not None and report.max_rel_error >= err:
                err, where = report.max_rel_error, report.worst.name
        worst[name] = err
        say(f"{name:{width}} {count:8d} {err:17.2e}  {where}{'' if err <= tol else '  FAIL'}")
    for name in missing_cases():
        say(f"{name:{width}}   no gradient check registered  FAIL")
    return worst


def add_arguments(parser):
    """Options of ``npformer gradcheck``."""
    parser.add_argument("--tol", type=positive_number, default=1e-6,
                        help="largest relative error allowed, a finite number > 0 (default 1e-6)")


def _row(text):
    """A row of the table, written at once: each takes seconds of work, and on a pipe it would
    otherwise wait in the buffer with the others."""
    print(text, flush=True)


def run(args):
    """Run ``npformer gradcheck``; 1 if any component fails."""
    worst = run_all(tol=args.tol, say=_row)
    failed = [n for n, e in worst.items() if not e <= args.tol] + missing_cases()
    print(f"{len(worst) - len(failed)} of {len(worst)} components within {args.tol:.0e}"
          if not failed else f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0
