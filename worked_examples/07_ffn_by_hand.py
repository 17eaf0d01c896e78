"""The FFN by hand: [1, -1] -> [1, -1, 2] -> ReLU [1, 0, 2] -> [1, 2]; without ReLU two layers are one.

W1 (2 x 3) = [[1, 0, 1], [0, 1, -1]] widens the vector, ReLU zeroes the negative
entry, W2 (3 x 2) = [[1, 0], [0, 1], [0, 1]] keeps the first entry and adds the
last two. The weights are written into npformer's own FFN (biases off). Then
the activation is taken away: x W1 W2 equals x (W1 W2), one linear layer.
"""
import numpy as np

from npformer import FFN, Linear
from npformer.worked import vec

W1 = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, -1.0]])
W2 = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])


def linear(weight):
    """A bias-free npformer Linear holding ``weight`` [d_in, d_out]."""
    layer = Linear(*weight.shape, bias=False, rng=np.random.default_rng(0), dtype=np.float64)
    layer.weight.data[...] = weight
    return layer


def run(out=print):
    ffn = FFN(d=2, hidden=3, activation="relu", bias=False, rng=np.random.default_rng(0),
              dtype=np.float64)
    ffn.up.weight.data[...] = W1                 # Linear weights are stored [d_in, d_out]
    ffn.down.weight.data[...] = W2
    x = np.array([1.0, -1.0])

    out(f"1. x = {vec(x, 0)}; W1 = {W1.astype(int).tolist()} (2 x 3); "
        f"W2 = {W2.astype(int).tolist()} (3 x 2); no biases")
    y, cache = ffn.forward(x)
    widened = cache.act.x                        # x W1, what entered the activation
    activated = cache.down.x                     # after ReLU, what entered W2
    out(f"   x W1        = {vec(widened, 0)}   (widened from 2 to 3 numbers)")
    out(f"   ReLU        = {vec(activated, 0)}   (the negative entry becomes 0)")
    out(f"   ReLU(.) W2  = {vec(y, 0)}   (first entry; sum of the last two)")

    out("2. Take the activation away: two linear layers in a row")
    first, second = linear(W1), linear(W2)
    merged = linear(first.weight.data @ second.weight.data)              # W1 W2, 2 x 2
    stacked = second(first(x))
    out(f"   x W1 W2 = {vec(stacked, 0)}; one layer with W = W1 W2 = "
        f"{merged.weight.data.astype(int).tolist()}: {vec(merged(x), 0)}")
    many = np.random.default_rng(1).standard_normal((1000, 2))
    collapse_gap = float(np.abs(second(first(many)) - merged(many)).max())
    relu_gap = float(np.abs(ffn(many) - merged(many)).max())
    out(f"   on 1,000 random inputs: two linear layers vs the single one differ by at most "
        f"{collapse_gap:.1e}")
    out(f"   with ReLU between them the outputs differ by up to {relu_gap:.2f}: "
        f"the activation is what adds expressive power")
    return {"widened": widened, "activated": activated, "output": y,
            "linear_output": stacked, "merged_weight": merged.weight.data.copy(),
            "collapse_gap": collapse_gap, "relu_gap": relu_gap}


if __name__ == "__main__":
    run()
