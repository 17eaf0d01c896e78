"""From hidden state to next-token probabilities: logits [2, 1, 0] -> softmax [0.665, 0.245, 0.090].

A teaching vocabulary of three words (merchant, buyer, unknown). The LM head
scores every candidate with one dot product each; here its weights are set so
the logits are [2, 1, 0]. A tied head reads the same scores from the input
embedding table. Softmax turns the scores into probabilities, and the
cross-entropy of the true next word is -log of its probability.
"""
import numpy as np

from npformer import Embedding, Linear, TiedHead, cross_entropy_forward, softmax
from npformer.worked import vec

VOCAB = ["merchant", "buyer", "unknown"]


def run(out=print):
    hidden = np.array([[1.0, 0.0]])                      # the last position's hidden state [N, d]
    head = Linear(2, len(VOCAB), bias=False, rng=np.random.default_rng(0), dtype=np.float64)
    head.weight.data[...] = [[2.0, 1.0, 0.0], [0.0, 0.0, 0.0]]    # [d, V]
    logits = head(hidden)[0]                              # [V]
    out(f"1. LM head: hidden {vec(hidden[0], 0)} times W [d, V] = {list(head.weight.shape)} "
        f"-> logits {vec(logits, 0)} for {VOCAB}")

    table = Embedding(len(VOCAB), 2, rng=np.random.default_rng(0), dtype=np.float64)
    table.weight.data[...] = [[2.0, 0.0], [1.0, 0.0], [0.0, 0.0]]  # [V, d]
    tied_logits = TiedHead(table)(hidden)[0]
    out(f"   tied head: the embedding table [V, d] = {list(table.weight.shape)} used as the "
        f"output matrix gives {vec(tied_logits, 0)}")
    out(f"   (the input side takes one row by id, e.g. id 1 -> {vec(table(np.array([1]))[0], 0)}; "
        f"the output side scores all {len(VOCAB)} rows)")

    probabilities = softmax(logits)
    out(f"2. softmax: exp {vec(np.exp(logits))} / {np.exp(logits).sum():.3f} = {vec(probabilities)}")
    for word, p in zip(VOCAB, probabilities):
        out(f"   {'P(next = ' + word + ')':23} = {p:.3f}")
    out(f"   they sum to {probabilities.sum():.3f}; the most likely id is "
        f"{int(np.argmax(probabilities))} ({VOCAB[int(np.argmax(probabilities))]})")

    loss, _ = cross_entropy_forward(logits[None], np.array([0]))
    out(f"3. If the true next word is 'merchant', the cross-entropy is -log {probabilities[0]:.3f} "
        f"= {float(loss):.3f}")
    return {"logits": logits, "tied_logits": tied_logits, "probabilities": probabilities,
            "loss_if_merchant": float(loss)}


if __name__ == "__main__":
    run()
