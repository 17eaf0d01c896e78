"""Mistakes in the embeddings (t01_embedding.py): the lookup's scatter, the padding row, the
shared positions, the sinusoid table."""
from .registry import mistake

EMB = "t01_embedding.Embedding.backward"
EMB_RECHECK = "np.add.at(d_E, ids, d_rows): every position adds its d_out into the row it read"
EMBS = "t01_embedding.Embeddings.backward"
SIN = "t01_embedding.sinusoid_table"
SIN_RECHECK = "PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i), w_i = base^(-2i/d), p from 0"
EMBS_RECHECK = "d_P[p] = sum over the batch of d_x[:, p]"

# -- Embedding.backward -----------------------------------------------------------------------------
mistake("embedding-fancy-index-add", EMB, "np.add.at(self.weight.grad, ids, d_rows)",
        "self.weight.grad[ids] += d_rows",
        "grad[ids] += ... keeps one of the gradients of an id read twice; np.add.at adds them all",
        EMB_RECHECK)
mistake("embedding-assigned", EMB, "np.add.at(self.weight.grad, ids, d_rows)", "self.weight.grad[ids] = d_rows",
        "the rows' gradients are assigned, not added: repeated ids and earlier passes are lost", EMB_RECHECK)
mistake("embedding-padding-row-learns", EMB,
        "d_rows = np.where((ids == self.padding_idx)[:, None], 0, d_rows)", "d_rows = d_rows",
        "the padding row must stay frozen: positions reading it send nothing back", EMB_RECHECK)
mistake("embedding-padding-row-zeroed", EMB, "np.add.at(self.weight.grad, ids, d_rows)",
        "np.add.at(self.weight.grad, ids, d_out.reshape(-1, d))\n"
        "    if self.padding_idx is not None:\n        self.weight.grad[self.padding_idx] = 0",
        "zeroing the padding row after adding also erases what was already in its gradient (a tied head, "
        "an earlier pass): leave out the positions that read padding instead", EMB_RECHECK)

# -- Embeddings.backward ----------------------------------------------------------------------------
mistake("positions-averaged-over-batch", EMBS, "d_x.sum(axis=0) if shared else d_x",
        "d_x.mean(axis=0) if shared else d_x",
        "positions shared by the whole batch receive the sum over the batch, not the mean",
        EMBS_RECHECK)
mistake("positions-first-sequence", EMBS, "d_x.sum(axis=0) if shared else d_x", "d_x[0] if shared else d_x",
        "positions shared by the whole batch receive every sequence's gradient, not the first one's",
        EMBS_RECHECK)
mistake("embeddings-scale-forgotten", EMBS, "d_x * self.scale if self.scale != 1.0 else d_x", "d_x",
        "the token rows were multiplied by ``scale``: their gradient is multiplied by it too",
        "x = scale * E[ids] + ...: d_E[ids] += scale * d_x")
mistake("embeddings-norm-skipped", EMBS, "d_x = self.norm.backward(d_x, cache.norm)", "d_x = d_x",
        "the embedding norm's backward is skipped", "x = Norm(sum of the lookups): undo the norm first")
mistake("embeddings-segments-skipped", EMBS, "self.segments.backward(d_x, cache.segments)", "None",
        "the segment table receives no gradient", "x = ... + S[segments]: d_S[segments] += d_x")
mistake("positions-before-the-norm", EMBS, "self.positions.backward(d_x.sum(axis=0) if shared else d_x",
        "self.positions.backward(d_out.sum(axis=0) if shared else d_out",
        "the position table receives the gradient after the norm's backward (d_x), not d_out",
        "x = Norm(E[ids] + P[positions]): undo the norm, then the lookups")
mistake("segments-before-the-norm", EMBS, "self.segments.backward(d_x, cache.segments)",
        "self.segments.backward(d_out, cache.segments)",
        "the segment rows were added before the norm: they receive the gradient after the norm's "
        "backward, like the tokens", "x = Norm(E[ids] + S[segments] + P): undo the norm first")
mistake("embeddings-norm-result-dropped", EMBS, "d_x = self.norm.backward(d_x, cache.norm)",
        "self.norm.backward(d_x, cache.norm)",
        "the norm's backward returns the gradient of its input: assign it, the tables need that one",
        "x = Norm(sum of the lookups): undo the norm first")

# -- Embedding.forward ------------------------------------------------------------------------------
mistake("embedding-lookup-scaled", "t01_embedding.Embedding.forward", "return self.weight.data[ids], LookupCache(ids)",
        "return self.weight.data[ids] * np.sqrt(self.weight.shape[1]), LookupCache(ids)",
        "the lookup returns the table's rows as they are; a sqrt(d) factor is Embeddings' optional scale",
        "out[b, n] = E[ids[b, n]]")

# -- sinusoid_table ---------------------------------------------------------------------------------
mistake("sinusoid-two-i-doubled", SIN, "w = base ** (-np.arange(0, d, 2) / d)", "w = base ** (-2 * np.arange(0, d, 2) / d)",
        "np.arange(0, d, 2) is already 2i: doubling it again makes the frequencies fall twice as fast", SIN_RECHECK)
mistake("sinusoid-positive-exponent", SIN, "w = base ** (-np.arange(0, d, 2) / d)", "w = base ** (np.arange(0, d, 2) / d)",
        "the frequencies are base^(-2i/d): the exponent is negative", SIN_RECHECK)
mistake("sinusoid-sin-cos-swapped", SIN, ("table[:, 0::2] = np.sin(p * w)", "table[:, 1::2] = np.cos(p * w[: d // 2])"),
        ("table[:, 0::2] = np.cos(p * w)", "table[:, 1::2] = np.sin(p * w[: d // 2])"),
        "even columns hold the sines, odd columns the cosines", SIN_RECHECK)
mistake("sinusoid-halves-layout", SIN, ("table[:, 0::2] = np.sin(p * w)", "table[:, 1::2] = np.cos(p * w[: d // 2])"),
        ("table[:, : (d + 1) // 2] = np.sin(p * w)", "table[:, (d + 1) // 2:] = np.cos(p * w[: d // 2])"),
        "sines and cosines alternate (even, odd columns), not the first half and the second half", SIN_RECHECK)
mistake("sinusoid-positions-from-one", SIN, "p = np.arange(max_len)[:, None]", "p = np.arange(1, max_len + 1)[:, None]",
        "positions start at 0: the first row is sin 0 = 0, cos 0 = 1", SIN_RECHECK)
mistake("sinusoid-exponent-i-over-d", SIN, "w = base ** (-np.arange(0, d, 2) / d)", "w = base ** (-np.arange(d // 2) / d)",
        "the exponent is 2i/d (the even column index over d), not i/d: the frequencies fall too slowly",
        SIN_RECHECK)
mistake("sinusoid-odd-width", SIN, "np.cos(p * w[: d // 2])", "np.cos(p * w)",
        "with an odd width there is one cosine column fewer than sine columns: take the first d // 2 "
        "frequencies", SIN_RECHECK)
