# exercise: embedding
# function: t01_embedding.py:Embedding.backward
# correct: the scatter-add written as a one-hot matrix product (each row of the table collects the rows that read it)
def backward(self, d_out, cache):
    V, d = self.weight.shape
    ids = cache.ids.ravel()
    reads = (ids[:, None] == np.arange(V)[None, :]).astype(d_out.dtype)    # [B*N, V]
    if self.padding_idx is not None:
        reads[:, self.padding_idx] = 0
    self.weight.grad += reads.T @ d_out.reshape(-1, d)
    return None
