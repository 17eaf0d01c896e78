"""Depth widens what a model can compute when the layers are non-linear; linear layers only merge.

The first article: stacked non-linear computation enlarges the range of functions
a model can express (layers are no count of "thinking steps"); without the
activation two layers merge into one (example 07). One input number x in [0, 1],
one output number, npformer's FFN each time:
1. eight linear layers (no activation) are one line through 0: x W1 ... W8 = x (W1 ... W8);
2. an FFN with two ReLU units set to the tent t(x) = 2 ReLU(x) - 4 ReLU(x - 1/2)
   rises from 0 to 1 and falls back; k tents in a row zigzag 2^(k-1) times:
   2^k straight pieces from 2k hidden units;
3. one hidden layer bends only where a unit's input crosses 0, so m units give at
   most m + 1 pieces: the 64 pieces of six tents would take 63 units side by side.
"""
import numpy as np

from npformer import FFN, Linear

GRID = np.linspace(0.0, 1.0, 4097)[:, None]            # steps of 1/4096: every bend of the tents


def pieces(f):
    """Straight pieces of f on GRID: 1 + the number of places where the slope changes."""
    slopes = np.diff(f[:, 0]) * 4096
    return 1 + int((np.abs(np.diff(slopes)) > 1e-6).sum())


def tent():
    """npformer's FFN (width 1, 2 hidden ReLU units) holding t(x) = 2 ReLU(x) - 4 ReLU(x - 1/2)."""
    ffn = FFN(1, hidden=2, activation="relu", rng=np.random.default_rng(0), dtype=np.float64)
    ffn.up.weight.data[...] = [[1.0, 1.0]]
    ffn.up.bias.data[...] = [0.0, -0.5]
    ffn.down.weight.data[...] = [[2.0], [-4.0]]
    ffn.down.bias.data[...] = 0.0
    return ffn


def run(out=print):
    rng = np.random.default_rng(0)
    widths = [1, 3, 3, 3, 3, 3, 3, 3, 1]
    stack = [Linear(a, b, rng=rng, dtype=np.float64) for a, b in zip(widths, widths[1:])]
    line, merged = GRID, np.eye(1)
    for layer in stack:
        layer.bias.data[...] = 0.0
        line, merged = layer(line), merged @ layer.weight.data      # merged: W1 ... W8
    linear_gap = float(np.abs(line - GRID @ merged).max())
    out(f"1. Eight linear layers: they equal x times one 1 x 1 matrix ({merged[0, 0]:.4f}) "
        f"to {linear_gap:.1e}; {pieces(line)} straight piece")

    out("2. Tents in a row (each an FFN with 2 ReLU units):")
    zigzag, y = {}, GRID
    for k in range(1, 7):
        y = tent()(y)
        zigzag[k] = y.copy()
        out(f"   depth {k} ({2 * k:2d} hidden units): {pieces(y):2d} pieces, "
            f"values at x = 0, 1/{2 ** k}, 2/{2 ** k}: {y[0, 0]:.0f}, {y[4096 >> k, 0]:.0f}, "
            f"{y[2 * (4096 >> k), 0]:.0f}")

    out("3. One hidden layer of 12 ReLU units, random weights: straight between its bends")
    wide = FFN(1, hidden=12, activation="relu", rng=rng, dtype=np.float64)
    wide.up.bias.data[...] = rng.uniform(-1.0, 1.0, 12)
    bends = np.sort(-wide.up.bias.data / wide.up.weight.data[0])   # where x w_j + b_j = 0
    inside = bends[(bends > 0) & (bends < 1)]
    ends = np.concatenate([[0.0], inside, [1.0]])
    quarter, three_quarters = (3 * ends[:-1] + ends[1:]) / 4, (ends[:-1] + 3 * ends[1:]) / 4

    def f(t):
        return wide(t[:, None])[:, 0]

    # on a straight piece [a, b], f(a) + f(b) = f(a + (b - a) / 4) + f(b - (b - a) / 4)
    straight_gap = float(np.abs(f(ends[:-1]) + f(ends[1:]) - f(quarter) - f(three_quarters)).max())
    out(f"   {len(inside)} of its 12 bends fall inside [0, 1]: {len(inside) + 1} pieces there, "
        f"straight between bends to {straight_gap:.1e};")
    out("   12 units side by side never make more than 13 pieces; stacked as 6 tents they made 64")
    return {"linear_output": line, "merged": merged, "linear_pieces": pieces(line),
            "zigzag": zigzag, "zigzag_pieces": {k: pieces(v) for k, v in zigzag.items()},
            "wide_output": wide(GRID), "wide_bends": bends, "wide_pieces": len(inside) + 1, "wide_straight_gap": straight_gap}


if __name__ == "__main__":
    run()
