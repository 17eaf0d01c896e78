"""What the code under test supports: the options it always uses and the capabilities it lacks.

A scope is given to ``conform(..., scope=...)`` as a dict or as the text of the command line,
``"causal=True,layout=interleaved,eps=1e-5,no_gqa,even_head_width,no_fully_masked"``:

- ``name=value`` *pins* an option: the code always computes with that value (an always-causal
  attention, a fixed eps). Every drawn example and corner is given that value, and a property
  that needs another value is "not run".
- a bare word names a capability the code lacks (``CAPABILITIES``): examples that need it are
  left out, and so is a property whose inputs need it.

The report says what was left out: "checked only with causal=True and H_kv = H".
"""
from __future__ import annotations

import ast

import numpy as np


class OutOfScope(Exception):
    """A call needs an option value or a capability the code under test does not have."""


def _heads_equal(component, args, options):
    if component == "multi_head_attention":
        return args[1].shape[1] == args[2].shape[1]
    return np.ndim(args[0]) < 4 or np.ndim(args[1]) < 4 or args[0].shape[1] == args[1].shape[1]


def _even_head_width(component, args, options):
    return np.shape(args[0])[-1] % 2 == 0 if component != "multi_head_attention" \
        else (args[1].shape[1] // args[5]) % 2 == 0


def _self_attention(component, args, options):
    return np.ndim(args[1]) < 4 or args[0].shape[2] == args[1].shape[2]


def _no_fully_masked(component, args, options):
    mask = options.get("mask")
    if component in ("attention", "grouped_attention"):
        from .example import Example
        from .properties.attention import _allowed
        return bool(_allowed(Example(("q", "k", "v"), tuple(args[:3]), options)).any(axis=-1).all())
    if component == "softmax" and mask is not None:
        x = np.asarray(args[0])
        return bool(np.broadcast_to(mask, x.shape).any(axis=options.get("axis", -1)).all())
    if component == "multi_head_attention" and mask is not None:
        return bool(np.asarray(mask).any(axis=-1).all())
    return True


def _no_ignored(component, args, options):
    return component != "cross_entropy" or not (np.asarray(args[1]) == options.get("ignore_index", -100)).any()


CAPABILITIES = {    # word: (what an example needs to be in scope, how the report says it)
    "no_gqa": (_heads_equal, "H_kv = H"),
    "even_head_width": (_even_head_width, "an even head width D"),
    "no_cached_keys": (_self_attention, "as many keys as queries (M = N)"),
    "no_fully_masked": (_no_fully_masked, "every query reading at least one key"),
    "no_ignore_index": (_no_ignored, "no ignored targets"),
}


def _value(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text                           # layout=interleaved: a bare word is a string


class Scope:
    """``pinned`` {option: value} and ``lacks`` (capability words) of one implementation."""

    def __init__(self, pinned=None, lacks=()):
        self.pinned, self.lacks = dict(pinned or {}), tuple(lacks)

    @classmethod
    def parse(cls, scope, component):
        """A Scope from a dict ({"causal": True, "no_gqa": True}), a text, or None; ValueError
        naming ``scope`` for an unknown option or capability of ``component``."""
        if isinstance(scope, Scope):
            return scope
        if scope is None:
            return cls()
        if isinstance(scope, str):
            items = {}
            for part in filter(None, (p.strip() for p in scope.split(","))):
                name, has_value, value = part.partition("=")
                items[name.strip()] = _value(value.strip()) if has_value else True
            scope = items
        if not isinstance(scope, dict):
            raise TypeError(f"scope: expected a dict or a text such as 'causal=True,no_gqa', got "
                            f"{type(scope).__name__}")
        options = component.option_defaults()
        pinned, lacks = {}, []
        for name, value in scope.items():
            if name in CAPABILITIES:
                if value:
                    lacks.append(name)
            elif name in options:
                pinned[name] = value
            else:
                raise ValueError(f"scope: {name!r} is neither an option of {component.name} "
                                 f"({', '.join(options) or 'it has none'}) nor a capability "
                                 f"({', '.join(CAPABILITIES)})")
        return cls(pinned, lacks)

    def __bool__(self):
        return bool(self.pinned or self.lacks)

    def pin(self, example):
        """``example`` with the pinned options set (a window needs causality: dropped without it)."""
        if not self.pinned:
            return example
        from .example import Example
        options = {**example.options, **self.pinned}
        if options.get("causal") is False and "window" in options and "window" not in self.pinned:
            options["window"] = None
        return Example(example.names, example.args, options)

    def fit(self, component, example):
        """A corner example brought into scope where it can be (ignored targets counted as 0),
        so a corner's other purpose (logits far beyond exp's range) still runs."""
        if "no_ignore_index" in self.lacks and component == "cross_entropy":
            from .example import Example
            logits, targets = example.args[:2]
            example = Example(example.names, (logits, np.where(targets == -100, 0, targets)) +
                              tuple(example.args[2:]), example.options)
        return example

    def admits(self, component, args, options):
        """True when an input needs no capability the code lacks."""
        return all(CAPABILITIES[word][0](component, args, options) for word in self.lacks)

    def missing(self, component, args, options):
        """The first capability the input needs and the code lacks, or None."""
        return next((w for w in self.lacks if not CAPABILITIES[w][0](component, args, options)), None)

    def describe(self):
        """ "causal=True and H_kv = H" """
        said = [f"{k}={v!r}" for k, v in self.pinned.items()] + [CAPABILITIES[w][1] for w in self.lacks]
        return " and ".join(said)
