"""One drawn input of a component: its positional arguments, named, and its options."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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

    def describe(self, width=100):
        """The example as text: each argument's shape and, when small, its values."""
        lines = []
        for name, value in self.inputs.items():
            lines.append(f"{name} = {_show(value, width)}")
        return "\n".join(lines)


def _show(value, width):
    if not isinstance(value, np.ndarray):
        return repr(value)
    text = np.array2string(value, max_line_width=width, threshold=64, precision=4,
                           separator=", ")
    head = f"{value.dtype} array of shape {value.shape}"
    if value.size > 64 or text.count("\n") > 12:
        return head
    return f"{head}:\n    " + text.replace("\n", "\n    ")
