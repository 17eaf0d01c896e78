"""MoE: 8 experts of 10 million parameters, top-2 routing -> 80 million stored, 20 million active.

A mixture of experts replaces the dense FFN by several expert FFNs and a router
that sends each token to its top-k experts. The counts come from
``MoE.counts`` (shapes only, nothing allocated): an expert of width 1,000 and
hidden width 5,000 without biases has 2 x 1,000 x 5,000 = 10 million
parameters. A small real MoE then shows the same split measured on its arrays,
and that different tokens pick different experts.
"""
import numpy as np

from npformer import MoE
from npformer.worked import vec


def run(out=print):
    out("1. The tutorial's sizes, from the shapes alone (MoE.counts):")
    big = MoE.counts(d=1000, n_experts=8, top_k=2, hidden=5000, expert="gelu", bias=False)
    out(f"   one expert (1,000 -> 5,000 -> 1,000, no biases): {big.per_expert:,} parameters")
    out(f"   all 8 experts: {big.experts_total:,} stored; top-2: {big.experts_active:,} "
        f"active per token")
    out(f"   the router adds {big.router:,} (1,000 x 8) to both: total {big.total:,}, "
        f"active {big.active:,}")
    out("   the attention layers come on top, and all 8 experts must still be stored in memory")

    out("2. A small real MoE (width 8, 8 experts of hidden width 16, top-2), measured:")
    rng = np.random.default_rng(0)
    moe = MoE(d=8, n_experts=8, top_k=2, hidden=16, expert="gelu", rng=rng)
    small = MoE.counts(d=8, n_experts=8, top_k=2, hidden=16, expert="gelu")
    out(f"   parameters on the arrays: total {moe.total_parameters():,}, active "
        f"{moe.active_parameters():,}; from the shapes: {small.total:,} and {small.active:,}")
    tokens = rng.standard_normal((1, 6, 8)).astype(np.float32)     # [B, N, d]
    y, cache = moe.forward(tokens)
    out(f"   6 tokens in, output {list(y.shape)}; experts chosen per token (best first):")
    for t, (pair, weights) in enumerate(zip(cache.chosen, cache.weights)):
        out(f"     token {t}: experts {pair.tolist()} with weights {vec(weights)}")
    served = [0 if call is None else len(call.rows) for call in cache.calls]
    out(f"   tokens each expert computed: {served} (total {sum(served)} = 6 tokens x 2)")
    return {"per_expert": big.per_expert, "experts_total": big.experts_total,
            "experts_active": big.experts_active, "router": big.router,
            "small_total_measured": moe.total_parameters(),
            "small_active_measured": moe.active_parameters(),
            "small_counts": small, "chosen": cache.chosen, "served": served}


if __name__ == "__main__":
    run()
