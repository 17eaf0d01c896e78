# exercise: embedding
# function: t01_embedding.py:Embedding.backward
# slip: a fancy-index += keeps one gradient per row: an id read twice gets one of its gradients, not their sum
def backward(self, d_out, cache):
    """Adds d_out into the rows that were read; returns None (ids have no gradient)."""
    # forward: out[b, n] = E[ids[b, n]]; an id read twice receives both gradients
    d = self.weight.shape[1]
    ids, d_rows = cache.ids.reshape(-1), d_out.reshape(-1, d)        # [B*N], [B*N, d]
    if self.padding_idx is not None:
        # the padding row is frozen: the positions that read it send nothing back
        d_rows = np.where((ids == self.padding_idx)[:, None], 0, d_rows)
    self.weight.grad[ids] += d_rows
    return None  # integer ids have no gradient
