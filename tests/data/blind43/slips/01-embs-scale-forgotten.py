# exercise: embedding
# function: t01_embedding.py:Embeddings.backward
# slip: the token rows were multiplied by scale in the forward, but their gradient is not
def backward(self, d_out, cache):
    """Accumulates into every table's gradient; ids have none, so returns None."""
    d_x = d_out
    if self.norm is not None:
        d_x = self.norm.backward(d_x, cache.norm)
    if self.positions is not None:
        # forward: x = ... + P[positions]; positions [N] are shared by every row of the batch
        shared = cache.positions.ids.ndim == 1
        self.positions.backward(d_x.sum(axis=0) if shared else d_x, cache.positions)
    if self.segments is not None:
        self.segments.backward(d_x, cache.segments)
    # forward: x = scale * E[ids] + ...
    self.tokens.backward(d_x, cache.tokens)
    return None
