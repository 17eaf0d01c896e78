"""A high attention weight is not a cause: what a position adds is its weight times its value.

The first article: the output is a mixture in which B still counts although A
weighs more, and a word's high weight does not prove the conclusion rests on it
(other heads, Wo, residuals and the FFN come after). Four facts, each computed
with npformer's attention:
1. the output is one mix of the value rows: out = sum_j w_j v_j, here the
   article's [1.340, 1.321] = A's share [1.340, 0] + B's share [0, 1.321];
2. for fixed weights the output is linear in V: the weights come from Q and K alone;
3. three keys weighted 0.90, 0.08 and 0.02 (teaching numbers): the first hands
   over a zero value, the last a large one. Zeroing a value changes the output by
   that position's share w_j v_j: nothing for the 0.90 key, the most for the
   0.02 key. Deleting a position from what may be read moves the output by
   w_j (out - v_j) / (1 - w_j): the others' weights grow to fill the gap;
4. a head whose rows of Wo are zero can look anywhere: the layer's output stays the same.
"""
import math

import numpy as np

from npformer import MultiHeadAttention, attention_forward
from npformer.worked import vec


def attend(query, keys, values, may_read=None):
    """One query over M keys: (weights [M], output [Dv]) from npformer's attention."""
    mask = None if may_read is None else may_read[None, None, None]
    mixed, cache = attention_forward(query[None, None, None], keys[None, None], values[None, None], mask)
    return cache.weights[0, 0, 0], mixed[0, 0, 0]


def one_mix(out):
    out("1. The article's numbers: the output is the sum of each position's share w_j v_j")
    keys, values = np.eye(2), np.array([[2.0, 0.0], [0.0, 4.0]])
    weights, output = attend(np.array([1.0, 0.0]), keys, values)
    shares = weights[:, None] * values                     # [M, Dv]: what each position adds
    out(f"   weights {vec(weights)}; A adds {vec(shares[0])}, B adds {vec(shares[1])}; "
        f"output {vec(output)}, neither A's value nor B's")
    return {"weights": weights, "shares": shares, "output": output, "values": values}


def linear_in_v(out):
    out("2. Same Q and K, other values: the weights stay, the output follows V linearly")
    rng = np.random.default_rng(0)
    query, keys = rng.standard_normal(4), rng.standard_normal((5, 4))
    v1, v2 = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    w1, o1 = attend(query, keys, v1)
    w2, o2 = attend(query, keys, v2)
    w_mix, o_mix = attend(query, keys, v1 + 3 * v2)
    gap = float(np.abs(o_mix - (o1 + 3 * o2)).max())
    out(f"   out(V1 + 3 V2) - (out(V1) + 3 out(V2)): largest {gap:.1e}; the weights moved by "
        f"{float(np.abs(w_mix - w1).max()):.1e}")
    return {"weights": (w1, w2, w_mix), "gap": gap}


def weight_is_not_effect(out):
    out("3. Three keys weighted 0.90, 0.08, 0.02 (score ln w); values A = [0, 0], B = [1, 0], C = [0, 10]")
    target = np.array([0.90, 0.08, 0.02])
    query = np.array([1.0, 0.0])
    keys = np.stack([math.sqrt(2) * np.log(target), np.zeros(3)], axis=1)   # q.k / sqrt(2) = ln w
    values = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 10.0]])
    weights, output = attend(query, keys, values)
    out(f"   weights {vec(weights)}, output {vec(output)}")
    zeroed, deleted = {}, {}
    for j, name in enumerate("ABC"):
        silent = values.copy()
        silent[j] = 0.0                                    # the position hands over nothing
        zeroed[name] = attend(query, keys, silent)[1] - output
        may_read = np.ones(3, bool)
        may_read[j] = False                                # the position cannot be read at all
        deleted[name] = attend(query, keys, values, may_read)[1] - output
        out(f"   {name} (weight {weights[j]:.2f}): its value zeroed moves the output by "
            f"{vec(zeroed[name])}; deleted, by {vec(deleted[name])}")
    out("   A weighs most yet adds nothing; deleting it matters only because B and C then weigh more")
    return {"weights": weights, "values": values, "output": output, "zeroed": zeroed, "deleted": deleted}


def wo_decides(out):
    out("4. Two heads; the rows of Wo that read head 0 set to zero, then head 0's queries changed")
    rng = np.random.default_rng(1)
    attn = MultiHeadAttention(4, 2, rng=rng, dtype=np.float64)   # D = 2: head 0 is features 0 and 1
    attn.out.weight.data[:2] = 0.0                    # Wo [d_in, d_out]: rows 0, 1 carry head 0
    x = rng.standard_normal((1, 5, 4))
    before, cache = attn.forward(x)
    attn.qkv.weight.data[:, :2] = 5 * rng.standard_normal((4, 2))  # head 0's query columns
    after, changed = attn.forward(x)
    moved = float(np.abs(changed.attn.weights[0, 0] - cache.attn.weights[0, 0]).max())
    gap = float(np.abs(after - before).max())
    out(f"   head 0's weights moved by up to {moved:.2f}; the layer's output by {gap:.1e}")
    return {"head0_moved": moved, "output_gap": gap}


def run(out=print):
    return {"mix": one_mix(out), "linear": linear_in_v(out), "effect": weight_is_not_effect(out),
            "wo": wo_decides(out)}


if __name__ == "__main__":
    run()
