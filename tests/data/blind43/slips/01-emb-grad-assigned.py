# exercise: embedding
# function: t01_embedding.py:Embedding.backward
# slip: the table's gradient is assigned, not accumulated: what was already in .grad is lost
def backward(self, d_out, cache):
    """Adds d_out into the rows that were read; returns None (ids have no gradient)."""
    # forward: out[b, n] = E[ids[b, n]]; an id read twice receives both gradients
    d = self.weight.shape[1]
    ids, d_rows = cache.ids.reshape(-1), d_out.reshape(-1, d)        # [B*N], [B*N, d]
    if self.padding_idx is not None:
        # the padding row is frozen: the positions that read it send nothing back
        d_rows = np.where((ids == self.padding_idx)[:, None], 0, d_rows)
    fresh = np.zeros_like(self.weight.grad)
    np.add.at(fresh, ids, d_rows)
    self.weight.grad = fresh
    return None  # integer ids have no gradient
