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


class OutOfScope(Exception):
    """A call needs an option value or a capability the code under test does not have."""


CAPABILITIES = {    # word: how the report says what an example then needs (each component's spec says
    # which of its examples need it: ``spec.capability``; an example of a component that says
    # nothing of a word is in scope)
    "no_gqa": "H_kv = H",
    "even_head_width": "an even head width D",
    "no_cached_keys": "as many keys as queries (M = N)",
    "no_fully_masked": "every query reading at least one key",
    "no_ignore_index": "no ignored targets",
}


def in_scope(component, word, args, options):
    """True when an example (``args``, ``options``) of ``component`` needs nothing that code
    lacking ``word`` lacks."""
    from ..specs import CAPABILITIES as NEEDS
    needs = NEEDS.get((component, word))
    return True if needs is None else bool(needs(args, options))


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
        from ..specs import CAPABILITIES as NEEDS
        options = component.option_defaults()
        pinned, lacks = {}, []
        for name, value in scope.items():
            if name in CAPABILITIES:
                words = sorted(w for c, w in NEEDS if c == component.name)
                if (component.name, name) not in NEEDS:    # a word the component never says it can lack
                    raise ValueError(f"scope: {name!r} names nothing {component.name} can lack "
                                     f"({', '.join(words) or 'it has no such words'}; options: "
                                     f"{', '.join(options) or 'none'})")
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
        from ..specs.example import Example
        options = {**example.options, **self.pinned}
        if options.get("causal") is False and "window" in options and "window" not in self.pinned:
            options["window"] = None
        return Example(example.names, example.args, options)

    def fit(self, component, example):
        """A corner example brought into scope where its spec says how (ignored targets counted
        as 0), so a corner's other purpose (logits far beyond exp's range) still runs."""
        from ..specs import FITS
        for word in self.lacks:
            fit = FITS.get((component, word))
            if fit is not None:
                example = fit(example)
        return example

    def admits(self, component, args, options):
        """True when an input needs no capability the code lacks."""
        return all(in_scope(component, word, args, options) for word in self.lacks)

    def missing(self, component, args, options):
        """The first capability the input needs and the code lacks, or None."""
        return next((w for w in self.lacks if not in_scope(component, w, args, options)), None)

    def describe(self):
        """ "causal=True and H_kv = H" """
        said = [f"{k}={v!r}" for k, v in self.pinned.items()] + [CAPABILITIES[w] for w in self.lacks]
        return " and ".join(said)
