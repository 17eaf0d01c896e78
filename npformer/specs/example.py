"""One drawn input of a component: its positional arguments, named, and its options."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

import numpy as np

BUDGET = 24                      # lines of values an example shows, at most (then shapes alone)


@dataclass
class Example:
    """One drawn input: ``args`` (positional, in the signature's order, named by ``names``)
    and ``options`` (keywords). ``describe()`` says it in one short paragraph."""

    names: tuple
    args: tuple
    options: dict = field(default_factory=dict)

    @property
    def inputs(self):
        """{name: value} of every argument, positional then keyword."""
        return {**dict(zip(self.names, self.args)), **self.options}

    def fresh(self):
        """A copy whose arrays are copies: code that writes into its inputs spoils only this."""
        def copied(value):
            return value.copy(order="K") if isinstance(value, np.ndarray) else value
        return Example(self.names, tuple(copied(a) for a in self.args),
                       {k: copied(v) for k, v in self.options.items()})

    def describe(self, width=88, budget=BUDGET):
        """The example as text: each array's dtype and shape, and its values while they fit in
        ``budget`` lines (an array of one repeated value in a line of its own: "every entry
        0.125"); the other arguments on one line at the end."""
        lines, others, alike = [], [], {}
        arrays = {n: v for n, v in self.inputs.items() if isinstance(v, np.ndarray)}
        constant = {n: _constant(v) for n, v in arrays.items()}
        many = sum(c is not None for c in constant.values()) > 3      # then grouped by their value
        for name, value in self.inputs.items():
            if not isinstance(value, np.ndarray):
                others.append(f"{name} = {value!r}")
            elif many and constant[name] is not None:
                alike.setdefault((str(value.dtype), constant[name]), []).append(f"{name} {value.shape}")
            else:
                shown = _show(value, width, budget - len(lines) - 1)
                lines.append(f"{name} = {shown[0]}")
                lines += ["    " + line for line in shown[1:]]
        for (dtype, said), names in alike.items():
            lines += textwrap.wrap(f"{dtype} arrays, every entry {said}: " + ", ".join(names), width,
                                   subsequent_indent="    ")
        if others:
            lines += textwrap.wrap(", ".join(others), width, subsequent_indent="    ")
        return "\n".join(lines)


def _constant(value):
    """The one value every entry of ``value`` holds, as text, or None."""
    if not value.size or value.dtype == object or not np.all(value == value.flat[0]):
        return None
    first = value.flat[0]
    return str(bool(first)) if value.dtype == bool else str(int(first)) if np.issubdtype(value.dtype, np.integer) \
        else f"{float(first):.6g}"


def _show(value, width, room):
    """[head line, value lines...] of one array; the values only when they fit in ``room``."""
    head = f"{value.dtype} array of shape {value.shape}"
    said = _constant(value)
    if said is not None:
        return [f"{head}, every entry {said}"]
    text = np.array2string(value, max_line_width=width - 4, threshold=64, precision=4, separator=", ")
    rows = text.split("\n")
    if value.size > 64 or len(rows) > min(12, room):
        return [head]
    return [f"{head}:"] + rows
