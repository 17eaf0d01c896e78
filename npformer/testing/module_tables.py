"""The parameter names a weight map needs, read from npformer's own modules: for each kind of
``conform_module``, every parameter's name, shape (in the config's symbols), the layout marks a
map may give it, and its name in each preset. docs/checking-your-code.md prints ``markdown()``
(a test keeps the two the same)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .module_run import qkv_widths, reference
from .weightmap import compile_weight_map

# a config whose widths all differ, so that each number in a shape names one symbol
_SIZES = dict(d_model=24, n_heads=4, vocab_size=50, max_len=14, ffn_hidden=40)
PRESETS_OF = {"gpt2_mlp": ("nanogpt", "hf_gpt2"), "gpt2_block": ("nanogpt", "hf_gpt2"),
              "llama_block": ("hf_llama",), "decoder": ("nanogpt", "hf_gpt2")}


def _config(kind):
    from .modules import _DEFAULTS
    config = replace(_DEFAULTS[kind], **_SIZES)
    return replace(config, n_kv_heads=2) if kind == "llama_block" else config


def _symbols(kind, config):
    widths = qkv_widths(config)
    qkv = "3 d" if widths[1] == widths[0] else "(H + 2 H_kv) D"
    return {config.d_model: "d", config.ffn_hidden: "F", sum(widths): qkv, config.vocab_size: "V",
            config.max_len: "N_max"}


def _marks(name, shape):
    """The marks a map may give this parameter: ``T`` for a weight of a linear layer (stored
    [out, in] by nn.Linear), ``q`` ``k`` ``v`` for the parts of the fused projection."""
    if name.endswith("qkv.weight"):
        return "`T`, `q` `k` `v`"
    if name.endswith("qkv.bias"):
        return "`q` `k` `v`"
    if len(shape) == 2 and not name.endswith(("tokens.weight", "positions.weight")):
        return "`T`"
    return ""


def rows(kind):
    """[(npformer's name, shape in symbols, marks, {preset: their name})] of ``kind``."""
    config = _config(kind)
    symbols = _symbols(kind, config)
    module = reference(kind, config, np.random.default_rng(0))
    module.named_parameters = (lambda found: (lambda: found))(list(module.named_parameters()))
    theirs = {}
    for preset in PRESETS_OF[kind]:
        for row in compile_weight_map(preset, kind, config, qkv_widths(config)):
            ours = dict(module.named_parameters())[row.ours[0]].data
            parts = row.to_theirs([ours])
            turned = any(a.shape != ours.shape or not np.array_equal(a, ours) for a in parts) \
                if len(parts) == 1 else any(a.ndim == 2 and a.shape[0] != ours.shape[0] for a in parts)
            said = " + ".join(row.theirs) + (" (T)" if turned else "")       # (T): stored transposed
            theirs.setdefault(row.ours[0], {})[preset] = said
    found, seen = [], set()
    for name, p in module.named_parameters():
        general = name.replace("blocks.0.", "blocks.{i}.")
        if name.startswith("blocks.") and not name.startswith("blocks.0."):
            continue
        shape = "[" + ", ".join(symbols.get(n, str(n)) for n in p.shape) + "]"
        their = {k: v.replace("h.0.", "h.{i}.").replace("layers.0.", "layers.{i}.")
                 for k, v in theirs.get(name, {}).items()}
        if general not in seen:
            seen.add(general)
            found.append((general, shape, _marks(name, p.shape), their))
    return found


def markdown(kinds=("gpt2_mlp", "gpt2_block", "llama_block", "decoder")):
    """The tables docs/checking-your-code.md prints: one per kind."""
    out = []
    for kind in kinds:
        presets = PRESETS_OF[kind]
        out.append(f"`{kind}`:\n")
        out.append("| npformer's name | shape | marks | " + " | ".join(f"`{p}`" for p in presets) + " |")
        out.append("|---|---|---|" + "---|" * len(presets))
        for name, shape, marks, theirs in rows(kind):
            their = " | ".join(f"`{theirs[p]}`" if p in theirs else "" for p in presets)
            out.append(f"| `{name}` | {shape} | {marks} | {their} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"
