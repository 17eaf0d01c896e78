"""The KV cache: the same tokens and logits, with far fewer positions projected.

Generating T tokens after a prompt of P tokens, step by step. Without a cache
every step runs the whole sequence again, so the Q/K/V projections of each
layer see P, P+1, ..., P+T-1 positions: T*P + T(T-1)/2 in all. With a cache
the prompt is projected once and each later step projects only its one new
position: P + T - 1. The counts below are read from the forward caches of the
actual runs (each layer's projection input), and the two runs must agree on
every step's logits.
"""
import numpy as np

from npformer import DecoderConfig, DecoderLM
from npformer.t12_generate import generate

PROMPT = [3, 8, 12, 5, 17, 42, 23, 6]          # the tutorial's ids


def projected_positions(cache):
    """Positions that went through the Q/K/V projection, summed over layers, in one forward."""
    return sum(block.attn.qkv.x.shape[1] for block in cache.blocks)   # qkv.x is [B, N, d]


def score_entries(cache):
    """Attention score entries computed in one forward, summed over layers and heads."""
    return sum(block.attn.weights.size for block in cache.blocks)     # [B, H, N, M] each


def run(out=print, new_tokens=8):
    config = DecoderConfig(n_layers=2, max_len=32)
    model = DecoderLM(config, np.random.default_rng(7)).astype(np.float64)
    P, T, L = len(PROMPT), new_tokens, config.n_layers
    out(f"Prompt of P = {P} ids {PROMPT}; generate T = {T} tokens greedily; {L} layers, width "
        f"{config.d_model}")

    out("1. Without a cache: run the whole sequence at every step")
    sequence = np.array([PROMPT])
    plain = {"ids": [], "logits": [], "positions": 0, "scores": 0}
    for _ in range(T):
        logits, cache = model.forward(sequence)
        plain["positions"] += projected_positions(cache)
        plain["scores"] += score_entries(cache)
        plain["logits"].append(logits[0, -1])
        plain["ids"].append(int(np.argmax(logits[0, -1])))
        sequence = np.concatenate([sequence, [[plain["ids"][-1]]]], axis=1)
    out(f"   generated {plain['ids']}; positions projected (all layers): {plain['positions']}")

    out("2. With a KV cache: the prompt once, then one new position per step")
    kv = model.new_kv_cache(batch=1, capacity=P + T)
    cached = {"ids": [], "logits": [], "positions": 0, "scores": 0}
    step_input = np.array([PROMPT])
    for _ in range(T):
        logits, cache = model.forward(step_input, kv_cache=kv)
        cached["positions"] += projected_positions(cache)
        cached["scores"] += score_entries(cache)
        cached["logits"].append(logits[0, -1])
        cached["ids"].append(int(np.argmax(logits[0, -1])))
        step_input = np.array([[cached["ids"][-1]]])
    out(f"   generated {cached['ids']}; positions projected (all layers): {cached['positions']}")
    out(f"   the cache holds {kv.length} positions in k and v {list(kv.k.shape)}: "
        f"{kv.nbytes:,} bytes (float64)")

    logit_gap = float(np.abs(np.array(plain["logits"]) - np.array(cached["logits"])).max())
    library = generate(model, [PROMPT], T)[0]                       # npformer.t12_generate, cached
    out("3. Comparison")
    out(f"   same tokens: {plain['ids'] == cached['ids']} (npformer.t12_generate agrees: "
        f"{library == cached['ids']}); largest logit difference over all steps {logit_gap:.1e}")
    out(f"   projected positions: {plain['positions']} = {L} x (T*P + T(T-1)/2) without the cache, "
        f"{cached['positions']} = {L} x (P + T - 1) with it "
        f"({plain['positions'] / cached['positions']:.1f} times fewer)")
    d = config.d_model
    width = (config.n_heads + 2 * (config.n_kv_heads or config.n_heads)) * config.head_dim
    per_position = 2 * d * width                  # one [d] x [d, width] product: multiply + add
    flops = {"plain": plain["positions"] * per_position, "cached": cached["positions"] * per_position}
    out(f"   Q/K/V projection FLOPs (2 x {d} x {width} = {per_position} per position): "
        f"{flops['plain']:,} vs {flops['cached']:,}")
    out(f"   attention score entries: {plain['scores']:,} vs {cached['scores']:,} (each new query "
        f"still reads every cached key)")
    return {"prompt_length": P, "new_tokens": T, "layers": L, "plain_positions": plain["positions"],
            "cached_positions": cached["positions"], "plain_ids": plain["ids"],
            "cached_ids": cached["ids"], "library_ids": library, "logit_gap": logit_gap,
            "plain_scores": plain["scores"], "cached_scores": cached["scores"],
            "heads": config.n_heads, "flops": flops, "cache_bytes": kv.nbytes}


if __name__ == "__main__":
    run()
