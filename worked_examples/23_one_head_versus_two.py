"""What one attention head can and cannot express: one weight row per query, so one way of reading.

The overview article: "a single attention head can only produce one matching
pattern". A reader position must collect two facts from its context: whether
a fact of kind A is present and whether one of kind B is (teaching data:
"who pays" and "how long"). Three contexts: A A, B B and A B; answers [1, 0],
[0, 1] and [1, 1].

One head (any Wq, Wk, Wv, Wo, biases included) gives the reader
    out = (w_0 x_0 + w_1 x_1) Wv Wo + b,    w_0 + w_1 = 1,
so its answer to A B is w_0 (its answer to A A) + w_1 (its answer to B B):
a mix of [1, 0]-ish and [0, 1]-ish can never be [1, 1]. With errors e_1, e_2
on the first two contexts, the third misses by (w_1, w_0) - w_0 e_1 - w_1 e_2;
minimising the total squared error gives s / (1 + s) with s = w_0^2 + w_1^2 >= 1/2:
at least 1/3, whatever the weights. Two heads of half the width (the same
number of parameters) read the two facts with two weight rows and get it right.
Nothing in the projections knows this beforehand: it is learned. Hold Wq at 0
(no query: every score 0, every weight 1/2) and train the rest, and the two
heads are stuck at the bound with s = 1/2, an error of 1/3; let Wq and Wk learn
and it goes to 0.
"""
import numpy as np

from npformer import AdamW, MultiHeadAttention
from npformer.worked import vec

A, B, READER = np.eye(4)[:3]                     # features: fact A, fact B, "reader", one unused
CONTEXTS = {"A A": (A, A), "B B": (B, B), "A B": (A, B)}
ANSWERS = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
X = np.array([[first, second, READER] for first, second in CONTEXTS.values()])   # [3, N=3, d=4]
MASK = np.array([[True, False, False], [True, True, False], [True, True, False]])  # reader: 0 and 1


def answers_of(attn):
    """The reader's first two output features for the three contexts, and its weights."""
    y, cache = attn.forward(X, MASK)
    return y[:, 2, :2], cache.weights[:, :, 2, :2], y, cache


def mixing_identity(out):
    """out(A B) = w_0 out(A A) + w_1 out(B B) for random one-head layers."""
    gaps, errors = [], []
    for seed in range(20):
        attn = MultiHeadAttention(4, 1, bias=True, rng=np.random.default_rng(seed), dtype=np.float64)
        attn.qkv.bias.data[...] = np.random.default_rng(100 + seed).standard_normal(12)
        _, weights, y, _ = answers_of(attn)
        w0, w1 = weights[2, 0]
        gaps.append(float(np.abs(y[2, 2] - (w0 * y[0, 2] + w1 * y[1, 2])).max()))
        errors.append(float(((y[:, 2, :2] - ANSWERS) ** 2).sum()))
    out("1. Twenty random one-head layers (biases included):")
    out(f"   answer to A B - (w_0 x answer to A A + w_1 x answer to B B): largest {max(gaps):.1e}")
    out(f"   total squared error: smallest {min(errors):.3f} (the bound: 1/3 = {1 / 3:.3f})")
    return gaps, errors


def train(heads, steps=1500, seed=0, learn_queries=True):
    """A layer of ``heads`` heads (width 4) fitted to the three answers with npformer's backward;
    ``learn_queries=False`` holds Wq (the first 4 columns of the fused qkv projection) at 0."""
    attn = MultiHeadAttention(4, heads, bias=True, rng=np.random.default_rng(seed), dtype=np.float64)
    optimizer = AdamW(attn.parameters(), lr=0.05, weight_decay=0.0)
    queries = (attn.qkv.weight, attn.qkv.bias)
    if not learn_queries:
        for p in queries:
            p.data[..., :4] = 0.0                           # q = 0 for every position
    for _ in range(steps):
        answers, _, y, cache = answers_of(attn)
        d_y = np.zeros_like(y)
        d_y[:, 2, :2] = 2 * (answers - ANSWERS)             # d/dy of the summed squared error
        attn.zero_grad()
        attn.backward(d_y, cache)
        if not learn_queries:
            for p in queries:
                p.grad[..., :4] = 0.0                       # AdamW then leaves them at 0
        optimizer.step()
    answers, weights, _, _ = answers_of(attn)
    return float(((answers - ANSWERS) ** 2).sum()), answers, weights


def run(out=print):
    gaps, errors = mixing_identity(out)
    out("2. Trained with AdamW to fit the three answers (same width 4, same parameter count):")
    trained = {}
    for heads in (1, 2):
        loss, answers, weights = train(heads)
        trained[heads] = {"loss": loss, "answers": answers, "weights": weights}
        out(f"   {heads} head{'s' if heads > 1 else ' '}: total squared error {loss:.6f}; "
            f"answers {', '.join(vec(a) for a in answers)}")
        for h in range(heads):
            out(f"      head {h} reading A B: weights on the two facts {vec(weights[2, h])}")
    out("   one head settles at 1/3 (half its weight on each fact); two heads split the work")
    loss, answers, weights = train(2, learn_queries=False)
    out(f"3. Two heads with Wq held at 0: total squared error {loss:.6f}, the reader's weights "
        f"{weights.min():.3f} to {weights.max():.3f} (no query, nothing to match);")
    out(f"   with Wq and Wk learned, as in 2: {trained[2]['loss']:.1e}. Which relation to match is learned")
    trained["frozen queries"] = {"loss": loss, "answers": answers, "weights": weights}
    return {"identity_gaps": gaps, "random_errors": errors, "trained": trained}


if __name__ == "__main__":
    run()
