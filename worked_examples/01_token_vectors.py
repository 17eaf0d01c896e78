"""From token id to vector: a width of 4,096 numbers per token, and a row that ignores context.

Both articles start here. An embedding table [V, d] turns each id into row
``id`` of the table; with a hidden width of 4,096 that row holds 4,096 numbers.
The lookup knows nothing about the neighbours: the same id gives the same row
in any sentence. Only after a block (attention reads the other positions) does
the vector at that position depend on what came before.
"""
import numpy as np

from npformer import DecoderConfig, DecoderLM, Embedding
from npformer.worked import vec


def run(out=print):
    rng = np.random.default_rng(0)

    out("1. One embedding table, hidden width 4,096 (the second article's example).")
    table = Embedding(vocab_size=10, d=4096, rng=rng)          # weight [V, d] = [10, 4096]
    ids = np.array([[7]])                                       # [B, N] = [1, 1]
    vectors = table(ids)                                        # [B, N, d]
    one_token = vectors[0, 0]
    out(f"   table shape {list(table.weight.shape)}; ids {ids.tolist()} -> "
        f"vectors {list(vectors.shape)}")
    out(f"   one token = {one_token.size:,} numbers "
        f"({one_token.nbytes:,} bytes in float32); the first three: {vec(one_token[:3])}")

    out("2. The lookup ignores context: the same id in two different sentences.")
    model = DecoderLM(DecoderConfig(), np.random.default_rng(7))   # the tutorial's tiny decoder
    shared_id = 17
    first = np.array([[3, 8, 12, shared_id]])       # same last token, different words before it
    second = np.array([[40, 2, 29, shared_id]])
    row_first = model.tokens(first)[0, -1]
    row_second = model.tokens(second)[0, -1]
    same_row = bool(np.array_equal(row_first, row_second))
    out(f"   id {shared_id} looked up in {first[0].tolist()} and in {second[0].tolist()}: "
        f"identical rows? {same_row}")

    out("3. After one block (attention + FFN) the vector at that position has read its context.")
    _, cache_first = model.forward(first)
    _, cache_second = model.forward(second)
    # The block output is the input of the final norm; its normalised form is cached there.
    after_first = cache_first.norm.xhat[0, -1]
    after_second = cache_second.norm.xhat[0, -1]
    context_gap = float(np.abs(after_first - after_second).max())
    out(f"   last position after the block, first sentence : {vec(after_first[:4])} ...")
    out(f"   last position after the block, second sentence: {vec(after_second[:4])} ...")
    out(f"   largest difference {context_gap:.3f}: the context now shows in the vector")
    return {"width": one_token.size, "vector_shape": vectors.shape, "bytes_per_token": one_token.nbytes,
            "same_row_before": same_row, "context_gap_after": context_gap,
            "sentences": (first[0], second[0]), "rows_before": (row_first, row_second),
            "rows_after": (after_first, after_second)}


if __name__ == "__main__":
    run()
