"""The conventions a whole block or model may follow, alone or together, as ``conform_module``
tries them before it blames the code.

Two kinds, both declared where their concept is: a field of npformer's config (the exact or
tanh GELU, half or interleaved RoPE pairs: ``CONFIG``), and a way published code differs that
npformer's modules do not offer as an option (``specs.MODULE_CONVENTIONS``: the parallel
residual, unbiased variance or eps after the root in every norm, gains stored as w and applied
as 1 + w, attention without 1/sqrt(D), embeddings times sqrt(d)). A ``Chosen`` is one or more
of them at once: the config it changes, the patches npformer's reference runs with, the
changes to the module once built, and how the weight map stores the gains.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ..specs import MODULE_CONVENTIONS

# config fields that are conventions: {field: {value: how to say it}}
CONFIG = {"ffn": {"gelu": "ffn='gelu' (exact erf GELU, not tanh)",
                  "gelu_tanh": "ffn='gelu_tanh' (tanh GELU, not exact)"},
          "rope_layout": {"interleaved": "rope_layout='interleaved'", "half": "rope_layout='half'"}}
TOGETHER_AT_MOST = 2             # conventions tried at once


@dataclass(frozen=True)
class Chosen:
    """One or more module conventions at once."""

    said: dict
    config: dict = field(default_factory=dict)
    patches: dict = field(default_factory=dict)
    tweaks: tuple = ()
    gains_one_plus: bool = False

    def describe(self):
        """ "residual='parallel', ffn='gelu' (exact erf GELU, not tanh)" """
        return ", ".join(CONFIG[k][v] if k in CONFIG else f"{k}={v!r}" for k, v in self.said.items())

    def tweak(self, module, config):
        """The reference module as the chosen conventions build it."""
        for tweak in self.tweaks:
            tweak(module, config)
        return module


def alone(kind, config):
    """[Chosen] of each convention that can apply to a ``kind`` of ``config``, one at a time:
    the config's own first (the GELU, the RoPE layout), then the others."""
    found = []
    if config.ffn in ("gelu", "gelu_tanh"):
        found.append(("ffn", "gelu" if config.ffn == "gelu_tanh" else "gelu_tanh"))
    if config.positions == "rope" and not kind.endswith("_mlp"):
        found.append(("rope_layout", "interleaved" if config.rope_layout == "half" else "half"))
    singles = [chosen([{name: value}], []) for name, value in found]
    return singles + [chosen([], [c]) for c in MODULE_CONVENTIONS if c.applies(kind, config)]


def chosen(fields, conventions):
    """A ``Chosen`` of config ``fields`` [{field: value}] and registry ``conventions``."""
    said, config = {}, {}
    for one in fields:
        said.update(one)
        config.update(one)
    for convention in conventions:
        said.update(convention.said)
    patches, builders = {}, []
    for convention in conventions:
        if convention.patches is not None and convention.patches not in builders:
            builders.append(convention.patches)
            patches.update(convention.patches(said))
    return Chosen(said, config, patches, tuple(c.tweak for c in conventions if c.tweak is not None),
                  any(c.gains_one_plus for c in conventions))


def stated(kind, config, convention):
    """The ``Chosen`` of a convention given up front ({"residual": "parallel", "ffn": "gelu"}),
    or ValueError naming what can be stated."""
    fields, conventions = [], []
    for name, value in dict(convention).items():
        if name in CONFIG and value in CONFIG[name]:
            fields.append({name: value})
            continue
        match = [c for c in MODULE_CONVENTIONS if c.said == {name: value}]
        if not match:
            known = "; ".join([f"{k}: {', '.join(map(repr, v))}" for k, v in CONFIG.items()] +
                              [", ".join(f"{k}: {v!r}" for k, v in c.said.items()) for c in MODULE_CONVENTIONS])
            raise ValueError(f"convention: expected a dict of {known}; got {convention!r}")
        conventions += match
    return chosen(fields, conventions)


def together(kind, config):
    """[Chosen] of two conventions at once (two config fields, a field and another, or two
    others), each pair once."""
    found = []
    singles = alone(kind, config)
    for a, b in itertools.combinations(singles, 2):
        if set(a.said) & set(b.said):
            continue
        conventions = [c for c in MODULE_CONVENTIONS if c.said in ({k: v} for k, v in {**a.said, **b.said}.items())]
        fields = [{k: v} for k, v in {**a.config, **b.config}.items()]
        found.append(chosen(fields, conventions))
    return found
