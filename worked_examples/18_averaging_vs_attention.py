"""Averaging vs attention: an average reads the context the same way whatever is asked; attention does not.

The first article's starting point. To let a position use its context, the
simplest rule is to average the earlier vectors; but that average is the same
whether the current position asks "who pays the shipping?" or "how long until
the refund?". Attention adds a match: the query decides the reading weights.
The vectors are teaching data (feature 1 "about who pays", feature 2 "about
timing"), not what a trained model holds. Averaging is itself attention with
all scores equal, so it is shown with the same function, ``attention_forward``.
"""
import math

import numpy as np

from npformer import attention_forward
from npformer.worked import vec


def read(query, keys, values):
    """One query against the context: (weights [M], output [D]) from npformer's attention."""
    mixed, cache = attention_forward(query[None, None, None], keys[None, None], values[None, None])
    return cache.weights[0, 0, 0], mixed[0, 0, 0]


def run(out=print):
    # Two earlier positions: A "the goods are faulty" (says who pays), B "refund to the card"
    # (says how long). Their keys announce what they are about; their values carry it.
    keys = np.array([[1.0, 0.0], [0.0, 1.0]])
    values = np.array([[1.0, 0.0], [0.0, 1.0]])
    questions = {"who pays?": np.array([4.0, 0.0]), "how long?": np.array([0.0, 4.0])}
    out(f"context: A key {vec(keys[0], 0)} value {vec(values[0], 0)} (who pays), "
        f"B key {vec(keys[1], 0)} value {vec(values[1], 0)} (timing)")

    out("1. Averaging: the same weights, whatever the question")
    mean = values.mean(axis=0)
    equal_weights, as_attention = read(np.zeros(2), keys, values)     # every score 0
    for name in questions:
        out(f"   {name:10} weights [0.500, 0.500] -> {vec(mean)}: the question never enters")
    out(f"   the same as attention whose scores are all equal (q = 0): weights {vec(equal_weights)} "
        f"-> {vec(as_attention)}")

    out("2. Attention: the question is a query; its match with each key sets the weights")
    attention = {}
    for name, query in questions.items():
        weights, output = read(query, keys, values)
        attention[name] = {"weights": weights, "output": output}
        out(f"   {name:10} q = {vec(query, 0)}: scores / sqrt(2) = {vec(keys @ query / math.sqrt(2))} "
            f"-> weights {vec(weights)} -> {vec(output)}")
    out(f"   the matching key gets sigmoid(4 / sqrt(2)) = {1 / (1 + math.exp(-4 / math.sqrt(2))):.3f}; "
        "the other still contributes the rest")
    gap = float(np.abs(attention["who pays?"]["output"] - attention["how long?"]["output"]).max())
    out(f"   the two questions now read different things: outputs differ by up to {gap:.3f}")
    return {"mean": mean, "equal_scores_weights": equal_weights, "equal_scores_output": as_attention,
            "attention": attention, "attention_gap": gap}


if __name__ == "__main__":
    run()
