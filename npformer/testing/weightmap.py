"""Weight maps: how the parameters of someone else's module become npformer's, and back.

A weight map is a dict {their name: our name} or {their name: (our name, *marks)}:

    {"attn.c_attn.weight": ("attn.qkv.weight", "T"),     # nn.Linear [out, in] -> ours [in, out]
     "attn.c_attn.bias":   "attn.qkv.bias",
     "self_attn.q_proj.weight": ("attn.qkv.weight", "T", "q"),   # one part of our fused Q|K|V
     "transformer.h.{i}.ln_1.weight": "blocks.{i}.norm1.gamma"}  # {i}: once per layer

Marks: ``"T"`` transposed; ``"q"``, ``"k"``, ``"v"`` their tensor is that part of our fused
``qkv`` columns [H*D | H_kv*D | H_kv*D] (weights or biases); ``"per_head"`` their fused q, k, v
columns grouped by key/value head (GPT-NeoX's query_key_value: [H, 3, D]; with H_kv < H each
group's query heads, then its key and its value head); ``"1+"`` a gain stored as w and applied
as 1 + w (Gemma's norms: ours is theirs + 1). ``{i}`` in a name repeats the row for every layer. Presets name common layouts: ``"nanogpt"``, ``"hf_gpt2"`` and
``"hf_llama"`` (the last two are ``npformer.interop``'s checkpoint tables).

``compile_weight_map`` turns a map into ``npformer.interop.ParamMap`` rows, the same rows
``from_hf`` converts checkpoints with: each converts their arrays to ours and back, and
gradients travel the same way (the conversions are linear).
"""
from __future__ import annotations

import numpy as np

from ..interop.tables import ParamMap, gpt2_table, llama_table

MARKS = ("T", "q", "k", "v", "per_head", "1+")
PARTS = ("q", "k", "v")

# nanoGPT's GPT (transformer.wte/wpe/h.{i}/ln_f, nn.Linear everywhere, head tied to wte).
NANOGPT = {
    "transformer.wte.weight": "tokens.weight",
    "transformer.wpe.weight": "positions.weight",
    "transformer.h.{i}.ln_1.weight": "blocks.{i}.norm1.gamma",
    "transformer.h.{i}.ln_1.bias": "blocks.{i}.norm1.beta",
    "transformer.h.{i}.attn.c_attn.weight": ("blocks.{i}.attn.qkv.weight", "T"),
    "transformer.h.{i}.attn.c_attn.bias": "blocks.{i}.attn.qkv.bias",
    "transformer.h.{i}.attn.c_proj.weight": ("blocks.{i}.attn.out.weight", "T"),
    "transformer.h.{i}.attn.c_proj.bias": "blocks.{i}.attn.out.bias",
    "transformer.h.{i}.ln_2.weight": "blocks.{i}.norm2.gamma",
    "transformer.h.{i}.ln_2.bias": "blocks.{i}.norm2.beta",
    "transformer.h.{i}.mlp.c_fc.weight": ("blocks.{i}.ffn.up.weight", "T"),
    "transformer.h.{i}.mlp.c_fc.bias": "blocks.{i}.ffn.up.bias",
    "transformer.h.{i}.mlp.c_proj.weight": ("blocks.{i}.ffn.down.weight", "T"),
    "transformer.h.{i}.mlp.c_proj.bias": "blocks.{i}.ffn.down.bias",
    "transformer.ln_f.weight": "norm.gamma",
    "transformer.ln_f.bias": "norm.beta",
}
PRESETS = ("nanogpt", "hf_gpt2", "hf_llama")
# The conventions a preset's model fixes, {config field: (value, why)}: code that follows the
# other one computes another function of those weights, a defect (conform_module names it).
# nanoGPT's names carry no such rule: nanoGPT itself computes the exact GELU.
PRESET_CONVENTIONS = {
    "hf_gpt2": {"ffn": ("gelu_tanh", "GPT-2's weights were trained with the tanh GELU (Hugging "
                                     "Face's activation_function='gelu_new')")},
    "hf_llama": {"rope_layout": ("half", "Hugging Face's Llama checkpoints pair feature c with "
                                         "c + D/2 (rotate_half: their q and k weights are permuted for it)")},
}


def _same(ours, theirs):
    return ParamMap((ours,), (theirs,), lambda a: [a[0]], lambda w: [w[0]])


def _transposed(ours, theirs):
    return ParamMap((ours,), (theirs,), lambda a: [a[0].T], lambda w: [w[0].T])


def _fused(ours, parts, transpose, widths):
    """Their q, k, v tensors (``parts`` {mark: their name}) side by side in our columns."""
    names = tuple(parts[p] for p in PARTS)
    cuts = np.cumsum(widths)[:-1]
    flip = (lambda x: x.T) if transpose else (lambda x: x)
    return ParamMap((ours,), names, lambda a: [np.concatenate([flip(x) for x in a], axis=-1)],
                    lambda w: [flip(x) for x in np.split(w[0], cuts, axis=-1)])


def _one_plus(ours, theirs):
    """A gain w of theirs applied as 1 + w: ours = theirs + 1. Affine: a gradient travels
    through the linear part alone (``gradients_to_ours``)."""
    return ParamMap((ours,), (theirs,), lambda a: [a[0] + 1], lambda w: [w[0] - 1])


def _per_head(ours, theirs, transpose, heads):
    """Their fused q, k, v columns grouped by key/value head ([H_kv, group + 2, D]: the group's
    query heads, its key head, its value head) as our [q | k | v] columns."""
    H, H_kv, D = heads
    group = H // H_kv
    flip = (lambda x: x.T) if transpose else (lambda x: x)

    def to_ours(arrays):
        lead = flip(arrays[0])
        blocks = lead.reshape(lead.shape[:-1] + (H_kv, group + 2, D))
        q, k, v = blocks[..., :group, :], blocks[..., group, :], blocks[..., group + 1, :]
        return [np.concatenate([q.reshape(lead.shape[:-1] + (-1,)), k.reshape(lead.shape[:-1] + (-1,)),
                                v.reshape(lead.shape[:-1] + (-1,))], axis=-1)]

    def to_theirs(arrays):
        w = arrays[0]
        q = w[..., :H * D].reshape(w.shape[:-1] + (H_kv, group, D))
        k = w[..., H * D:(H + H_kv) * D].reshape(w.shape[:-1] + (H_kv, 1, D))
        v = w[..., (H + H_kv) * D:].reshape(w.shape[:-1] + (H_kv, 1, D))
        return [flip(np.concatenate([q, k, v], axis=-2).reshape(w.shape[:-1] + (-1,)))]
    return ParamMap((ours,), (theirs,), to_ours, to_theirs)


def gradients_to_ours(rows, theirs):
    """{our name: gradient} from their gradients: each row's conversion less what it gives a
    zero (a gain stored as w - 1 shifts the weight, never its gradient)."""
    out = {}
    for row in rows:
        given = [theirs[n] for n in row.theirs]
        shifts = row.to_ours([np.zeros_like(np.asarray(g, np.float64)) for g in given])
        out.update(zip(row.ours, (g - z for g, z in zip(row.to_ours(given), shifts))))
    return out


def _row(value, their):
    """(our name, marks) of one map entry; ValueError naming their key otherwise."""
    if isinstance(value, str):
        return value, ()
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], str):
        marks = tuple(value[1:])
        bad = [m for m in marks if m not in MARKS]
        if bad:
            raise ValueError(f"weight_map[{their!r}]: expected marks among {MARKS}, got {bad}")
        return value[0], marks
    raise TypeError(f"weight_map[{their!r}]: expected our name or (our name, *marks), got {value!r}")


def expand_layers(weight_map, n_layers):
    """Every ``{i}`` row repeated for layers 0..n_layers-1."""
    out = {}
    for their, value in weight_map.items():
        if "{i}" in their:
            for i in range(n_layers):
                ours, marks = _row(value, their)
                out[their.replace("{i}", str(i))] = (ours.replace("{i}", str(i)), *marks)
        else:
            out[their] = value
    return out


def _strip_prefix(table, ours_prefix, theirs_prefix):
    """Rows of one layer of a model table, with the layer's prefixes taken off both sides."""
    rows = []
    for row in table:
        if all(n.startswith(ours_prefix) for n in row.ours) and \
                all(n.startswith(theirs_prefix) for n in row.theirs):
            rows.append(ParamMap(tuple(n[len(ours_prefix):] for n in row.ours),
                                 tuple(n[len(theirs_prefix):] for n in row.theirs),
                                 row.to_ours, row.to_theirs))
    return rows


def preset_table(name, kind, config):
    """The rows of a named preset for one kind of module."""
    if name == "nanogpt":
        return None     # a plain map, compiled by the caller
    if name not in PRESETS:
        raise ValueError(f"weight_map: expected a dict or one of {PRESETS}, got {name!r}")
    table = (gpt2_table if name == "hf_gpt2" else llama_table)(config)
    theirs_layer = "transformer.h.0." if name == "hf_gpt2" else "model.layers.0."
    if kind == "decoder":
        return table
    rows = _strip_prefix(table, "blocks.0.", theirs_layer)
    if kind.endswith("_mlp"):
        return _strip_prefix(rows, "ffn.", "mlp.")
    return rows


def _one_layer(model_map, kind):
    """The rows of layer {i} of a whole-model map, prefixes taken off (the MLP's: its own)."""
    layer, ours_layer = "transformer.h.{i}.", "blocks.{i}."
    if kind.endswith("_mlp"):
        layer, ours_layer = layer + "mlp.", ours_layer + "ffn."
    out = {}
    for their, value in model_map.items():
        ours, marks = _row(value, their)
        if their.startswith(layer) and ours.startswith(ours_layer):
            out[their[len(layer):]] = (ours[len(ours_layer):], *marks)
    return out


def compile_weight_map(weight_map, kind, config, qkv_widths=None, gains_one_plus=False):
    """ParamMap rows for a weight map (a dict, or a preset name) and a module's config;
    ``gains_one_plus``: every norm's gain is stored as w and applied as 1 + w (a convention)."""
    if isinstance(weight_map, str):
        rows = preset_table(weight_map, kind, config)
        if rows is not None:
            return rows
        weight_map = NANOGPT if kind == "decoder" else _one_layer(NANOGPT, kind)
    if not isinstance(weight_map, dict):
        raise TypeError(f"weight_map: expected a dict or a preset name {PRESETS}, "
                        f"got {type(weight_map).__name__}")
    weight_map = expand_layers(weight_map, getattr(config, "n_layers", 1))
    rows, fused = [], {}
    heads = (config.n_heads, config.n_kv_heads or config.n_heads, config.d_model // config.n_heads)
    for their, value in weight_map.items():
        ours, marks = _row(value, their)
        parts = [m for m in marks if m in PARTS]
        if "1+" in marks or (gains_one_plus and ours.endswith("gamma")):
            rows.append(_one_plus(ours, their))
        elif "per_head" in marks:
            rows.append(_per_head(ours, their, "T" in marks, heads))
        elif parts:
            fused.setdefault(ours, {})[parts[0]] = their
            fused[ours]["T"] = fused[ours].get("T", False) or "T" in marks
        elif "T" in marks:
            rows.append(_transposed(ours, their))
        else:
            rows.append(_same(ours, their))
    for ours, parts in fused.items():
        missing = [p for p in PARTS if p not in parts]
        if missing:
            raise ValueError(f"weight_map: {ours!r} is fused from q, k and v parts; "
                             f"no entry marks {missing}")
        rows.append(_fused(ours, parts, parts["T"], qkv_widths))
    return rows


def to_theirs(rows, ours):
    """{their name: array} from {our name: array} through the rows."""
    out = {}
    for row in rows:
        for name, array in zip(row.theirs, row.to_theirs([ours[n] for n in row.ours])):
            out[name] = np.ascontiguousarray(array)
    return out


def to_ours(rows, theirs):
    """{our name: array} from {their name: array} (their gradients, say) through the rows."""
    out = {}
    for row in rows:
        out.update(zip(row.ours, row.to_ours([theirs[n] for n in row.theirs])))
    return out


def nest(flat):
    """{"blocks.0.attn.c_attn.w": a} -> {"blocks": [{"attn": {"c_attn": {"w": a}}}]}: the nested
    params dict NumPy implementations usually take (integer keys become list positions)."""
    root = {}
    for name, value in flat.items():
        node, keys = root, name.split(".")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return _lists(root)


def _lists(node):
    if not isinstance(node, dict):
        return node
    node = {k: _lists(v) for k, v in node.items()}
    if node and all(k.isdigit() for k in node):
        return [node[str(i)] for i in range(len(node))]
    return node


def flatten(nested, prefix=""):
    """The inverse of ``nest``: {dotted name: leaf}."""
    if isinstance(nested, dict):
        items = nested.items()
    elif isinstance(nested, (list, tuple)):
        items = ((str(i), v) for i, v in enumerate(nested))
    else:
        return {prefix[:-1]: nested}
    out = {}
    for key, value in items:
        out.update(flatten(value, f"{prefix}{key}."))
    return out
