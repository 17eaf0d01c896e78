"""What ``conform_module`` reports: one ``ComparedTensor`` per compared tensor, a ``ModuleReport``
with the verdict, and the comparison that fills them (relative to the tensor's largest entry)."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

import numpy as np

from .compare import SCALE_FLOOR, tolerance
from ..specs.facts import differing

TOL_FLOAT64 = tolerance("float64")     # relative to the tensor's largest entry: the one table's
TOL_FLOAT32 = tolerance("float32")     # code that computes in float32 inside (a .float() norm, say)


@dataclass
class ComparedTensor:
    """One compared tensor: its name (ours, and theirs), the worst relative error and where."""

    name: str
    theirs: str
    error: float
    index: tuple
    yours: float
    expected: float


@dataclass
class ModuleReport:
    """What ``conform_module`` found: ``verdict``, every tensor's check, the smallest failure."""

    kind: str
    verdict: str
    checked: str
    tensors: list = field(default_factory=list)
    smallest: dict | None = None
    notes: list = field(default_factory=list)
    seconds: float = 0.0
    parts: list = field(default_factory=list)     # module_parts.PartCheck of each sub-module checked alone
    mistake: object = None       # the catalogued Mistake (or a convention the preset rules out) it computes

    @property
    def ok(self):
        """True for every verdict but "does not conform"."""
        return not self.verdict.startswith("does not conform")

    def __bool__(self):
        # ``assert conform_module(...)`` fails on a module that does not conform
        return self.ok

    @property
    def failing(self):
        """The tensors whose error exceeds the tolerance of the verdict."""
        tol = TOL_FLOAT32 if "float32" in self.verdict else TOL_FLOAT64
        return [t for t in self.tensors if not t.error <= tol]

    def __str__(self):
        lines = [f"conform_module({self.kind!r}): {self.verdict}"]
        said = []
        if self.mistake is not None:
            said.append(f"the mistake: {self.mistake.name}: {self.mistake.says}")
            if getattr(self.mistake, "recheck", ""):
                said.append(f"re-check: {self.mistake.recheck}")
        said += [f"checked: {self.checked}"] + [f"note: {n}" for n in self.notes]
        for text in said:
            lines += textwrap.wrap(text, 100, initial_indent="  ", subsequent_indent="    ",
                                   break_on_hyphens=False)
        if self.smallest:
            s = self.smallest
            lines += textwrap.wrap(f"smallest failing example: seed {s['seed']}, B={s['B']}, N={s['N']}: "
                                   f"{s['tensor']} at {s['index']}: yours {{}}, expected {{}} (relative error "
                                   f"{s['error']:.2e})".format(*differing(s['yours'], s['expected'])), 100,
                                   initial_indent="  ", subsequent_indent="    ")
        width = max([len(t.name) for t in self.tensors] + [6])
        lines.append(f"  {'tensor':<{width}}  rel. error  worst index   theirs")
        for t in self.tensors:
            theirs = "" if t.theirs == t.name else t.theirs
            lines.append(f"  {t.name:<{width}}  {t.error:9.2e}   {str(t.index):<12} {theirs}")
        lines.append(f"  ({self.seconds:.2f} s)")
        return "\n".join(lines)

    def assert_conforms(self):
        """AssertionError with the report unless the verdict is a pass."""
        if not self.ok:
            raise AssertionError(str(self))


def compare_tensors(name, theirs_name, yours, expected, scale=0.0):
    """A ``ComparedTensor``: the largest difference relative to the tensor's largest entry, or to
    ``SCALE_FLOOR`` of the example's data ``scale`` for a tensor far below it (one that is 0 in
    exact arithmetic holds only rounding noise: no relative error to speak of)."""
    yours, expected = np.asarray(yours, np.float64), np.asarray(expected, np.float64)
    if yours.shape != expected.shape:
        return ComparedTensor(name, theirs_name, np.inf, ("shape",), np.nan, np.nan)
    diff = np.abs(yours - expected)
    if not np.all(np.isfinite(yours)):
        diff = np.where(np.isfinite(yours), diff, np.inf)
    index = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
    scale = max(float(np.max(np.abs(expected), initial=0.0)), SCALE_FLOOR * scale, 1e-12)
    index = tuple(int(i) for i in index)
    return ComparedTensor(name, theirs_name, float(np.max(diff, initial=0.0)) / scale, index,
                       float(yours[index]) if diff.size else np.nan,
                       float(expected[index]) if diff.size else np.nan)
