"""The tutorial's tiny decoder: vocabulary 50, width 8, 2 heads, ids 3 8 12 5 17 42 23 6.

The first article's complete forward program rebuilt from npformer's pieces
(``npformer tour`` walks its stages): logits [1, 8, 50], attention
[1, 2, 8, 8], the first row reading only position 0 and the last row all
eight, and the top-3 next-token candidates of the last position (random
weights: the ids mean nothing yet). Then 4 heads instead of 2 (head width 2,
logits unchanged), and the causal mask removed (the first row reads ahead).
"""
import numpy as np

from npformer import softmax
from npformer.worked import vec
from npformer.cli.tour import tour


def quiet(*_):
    """An ``out`` that prints nothing (for the variants, summarised below instead)."""


def run(out=print):
    out("1. Two heads, causal mask (the tutorial's program), seed 7:")
    logits, cache = tour(n_heads=2, causal=True, seed=7, out=lambda line: out("   " + line))
    weights = cache.attention(0)                                   # [B, H, N, N]
    first_row, last_row = weights[0, :, 0], weights[0, :, -1]      # [H, N] each
    probabilities = softmax(logits[0, -1])
    top3 = np.argsort(probabilities)[::-1][:3]
    out(f"   logits {list(logits.shape)}, attention {list(weights.shape)}")
    out(f"   positions read by the first row of each head: {(first_row > 0).sum(axis=-1).tolist()}; "
        f"by the last row: {(last_row > 0).sum(axis=-1).tolist()}")
    out(f"   top-3 candidates: ids {top3.tolist()} with probabilities {vec(probabilities[top3], 4)}")

    out("2. Four heads, width still 8:")
    logits4, cache4 = tour(n_heads=4, causal=True, seed=7, out=quiet)
    weights4 = cache4.attention(0)
    head_dim4 = cache4.blocks[0].attn.attn.q.shape[-1]
    out(f"   head width 8 / 4 = {head_dim4}; attention {list(weights4.shape)}; "
        f"logits still {list(logits4.shape)}")

    out("3. The causal mask removed (2 heads):")
    logits_open, cache_open = tour(n_heads=2, causal=False, seed=7, out=quiet)
    open_first = cache_open.attention(0)[0, :, 0]                  # [H, N]
    out(f"   first row of head 0 now: {vec(open_first[0])}")
    reads_open = int((open_first[0] > 0).sum())
    out(f"   it reads {reads_open} positions, the {reads_open - 1} after it included: the "
        f"maths still runs, but a next-token model could now copy the answer")
    return {"logits_shape": logits.shape, "attention_shape": weights.shape, "first_row": first_row,
            "last_row": last_row, "top3": top3, "top3_probabilities": probabilities[top3],
            "last_probabilities": probabilities, "logits": logits,
            "heads4_attention_shape": weights4.shape, "heads4_head_dim": head_dim4,
            "heads4_logits_shape": logits4.shape, "unmasked_first_row": open_first}


if __name__ == "__main__":
    run()
