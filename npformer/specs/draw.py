"""What specs draw inputs with: values, arrays, sizes, masks, positions, targets, layer weights.

A spec's draw function has hypothesis's ``composite`` form, ``draws(draw) -> Example``; these
are the pieces it draws with. Hypothesis is imported when something is drawn, not before (a
spec is imported by ``npformer gradcheck`` too, which needs no hypothesis). Values are odd
multiples of 1/8 in [-15/8, 15/8]: never exactly 0 (where ReLU's slope is a matter of
convention), printed short, and shrunk towards +-1/8. Sizes shrink towards their low end.
"""
from __future__ import annotations

import numpy as np

from .example import Example  # noqa: F401  (what draw functions return)

IGNORE_INDEX = -100
MASK_SHAPES = ("none", "key padding [B, 1, 1, M]", "table [N, M]", "per head [H, N, M]",
               "per sequence [B, 1, N, M]", "full [B, H, N, M]")


def st():
    """hypothesis.strategies."""
    from hypothesis import strategies
    return strategies


def hnp():
    """hypothesis.extra.numpy."""
    from hypothesis.extra import numpy
    return numpy


def values():
    """A float: an odd multiple of 1/8 in [-15/8, 15/8] (never 0)."""
    return st().integers(-8, 7).map(lambda i: (2 * i + 1) / 8)


def arrays(shape):
    """A float64 array of ``values()``."""
    return hnp().arrays(np.float64, tuple(shape), elements=values())


def size(low=1, high=4):
    """A positive dimension, shrinking towards ``low``."""
    return st().integers(low, high)


def sampled(choices):
    """One of ``choices``, shrinking towards the first."""
    return st().sampled_from(list(choices))


def ids(shape, V):
    """An int64 array of ``shape`` in [0, V)."""
    return hnp().arrays(np.int64, tuple(shape), elements=st().integers(0, V - 1))


def booleans(shape):
    """A bool array of ``shape``."""
    return hnp().arrays(bool, tuple(shape))


def head_groups(draw, grouped=True, max_kv=2, max_group=3):
    """(H, H_kv): H query heads over H_kv key/value heads, H a multiple of H_kv (H_kv = H
    when not ``grouped``; H_kv = 1 is multi-query attention)."""
    H_kv = draw(st().integers(1, max_kv))
    group = draw(st().integers(1, max_group)) if grouped else 1
    return H_kv * group, H_kv


def lengths(draw, B, N):
    """Real tokens per sequence, [B] in [0, N] (0: nothing to read)."""
    return np.array(draw(st().lists(st().integers(0, N), min_size=B, max_size=B)))


def shape_into(draw, shape):
    """A shape that broadcasts to ``shape`` without growing it: its last axes, each 1 or equal."""
    count = draw(st().integers(1, len(shape)))
    return tuple(draw(sampled([1, n])) for n in shape[len(shape) - count:])


def leading_axes(draw):
    """The axes before the features: [N], [B, N] or [B, H, N] (rows, sequences, heads)."""
    return tuple(draw(st().lists(size(1, 3), min_size=1, max_size=3)))


def mask(draw, B, H, N, M, shapes=MASK_SHAPES):
    """A boolean "may read" mask that broadcasts to [B, H, N, M], or None; left or right
    padding, or any pattern (rows with no readable key included)."""
    kind = draw(sampled(shapes))
    if kind == "none":
        return None
    if kind.startswith("key padding"):
        real = lengths(draw, B, M)
        keys = np.arange(M)[None, :]
        table = keys >= M - real[:, None] if draw(st().booleans()) else keys < real[:, None]
        return table[:, None, None, :]
    shape = {"table [N, M]": (N, M), "per head [H, N, M]": (H, N, M),
             "per sequence [B, 1, N, M]": (B, 1, N, M), "full [B, H, N, M]": (B, H, N, M)}[kind]
    return draw(booleans(shape))


def causal_options(draw, M):
    """{"causal": bool, "window": None or 1..M} (a window only with causal)."""
    causal = draw(st().booleans())
    window = draw(st().one_of(st().none(), st().integers(1, M))) if causal else None
    return {"causal": causal, "window": window}


def positions(draw, B, N, per_row=None):
    """Integer positions [N] or [B, N], starting at an offset (as after cached tokens)."""
    per_row = draw(st().booleans()) if per_row is None else per_row
    if per_row:
        starts = np.array(draw(st().lists(st().integers(0, 6), min_size=B, max_size=B)))
        return starts[:, None] + np.arange(N)[None, :]
    return draw(st().integers(0, 6)) + np.arange(N)


def targets(draw, shape, V):
    """Target ids of ``shape`` in [0, V), some of them IGNORE_INDEX (possibly all)."""
    ignored = draw(booleans(shape))
    return np.where(ignored, IGNORE_INDEX, draw(ids(shape, V)))


def key_mask(draw, B, N):
    """A [B, N] mask of real tokens (right or left padding, a row may be all padding), or None."""
    if not draw(st().booleans()):
        return None
    real, keys = lengths(draw, B, N), np.arange(N)[None, :]
    return keys >= N - real[:, None] if draw(st().booleans()) else keys < real[:, None]


def normal(rng, *shape):
    """A float64 array of standard normal draws (corners and cases)."""
    return rng.standard_normal(shape)


# -- layers of layers: their weights drawn, their rows never constant ---------------------------
def alternating(x):
    """``x`` with every other feature's sign flipped: a row of one value becomes +v, -v, +v ...
    Rows that a norm reads are never constant then, even after shrinking (a constant row's
    numbers, all at eps's limit, would explain nothing)."""
    return x * (-1.0) ** np.arange(x.shape[-1])


def assume_varied(rows):
    """Leave out an example with a constant row (a norm's eps limit)."""
    from hypothesis import assume
    assume(bool(np.all(np.ptp(rows.reshape(-1, rows.shape[-1]), axis=-1) > 0)))


def weights_of(draw, named):
    """(names, arrays) of a layer's weights ``named`` [(name, shape)]: from a drawn seed, odd
    multiples of 1/8 in [-7/8, 7/8] (a few hundred numbers drawn one by one would make each
    example slow), and at seed 0, where shrinking goes first, every weight 1/8. Token and
    position tables alternate their signs (``alternating``) so that the rows the first norm
    reads vary."""
    sizes = [int(np.prod(shape)) for _, shape in named]
    seed = draw(st().integers(0, 2 ** 20))
    flat = np.full(sum(sizes), 1 / 8) if seed == 0 else \
        (2 * np.random.default_rng(seed).integers(-4, 4, sum(sizes)) + 1) / 8
    found, start = [], 0
    for (name, shape), count in zip(named, sizes):
        value = flat[start:start + count].reshape(shape)
        start += count
        found.append(alternating(value) if name.endswith(("tokens.weight", "positions.weight")) else value)
    return tuple(name for name, _ in named), tuple(found)


def heads(draw, d, positions=None):
    """(H, H_kv) dividing d (RoPE turns pairs: its heads are 2 or 4 wide)."""
    widths = (1, 2) if positions == "rope" else (1, 2, 3)
    H = draw(sampled([h for h in widths if d % h == 0]))
    H_kv = draw(sampled([h for h in range(1, H + 1) if H % h == 0]))
    return H, H_kv


def width(draw, positions):
    """d of 3 or 4 (a LayerNorm of 2 features is constant, of 1 undefined); 4 with RoPE."""
    return 4 if positions == "rope" else draw(sampled([3, 4]))


# Each choice below shrinks towards the layer with the most parameters (LayerNorm, biases, two
# layers, learned positions, an untied head): a failing gradient then has its weight in the
# example shrunk first, and the other failing gradients need no search of their own.
def block_recipe(draw, d, positions=None):
    """Heads (GQA), the norm, the FFN, its width and biases of a block."""
    H, H_kv = heads(draw, d, positions)
    return {"n_heads": H, "n_kv_heads": H_kv, "norm": draw(sampled(["layernorm", "rmsnorm"])),
            "ffn": draw(sampled(["gelu", "relu"])), "ffn_hidden": draw(size(1, 3)),
            "ffn_bias": draw(sampled([True, False])), "attn_bias": draw(sampled([True, False]))}
