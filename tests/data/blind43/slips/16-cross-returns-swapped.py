# exercise: cross-attention
# function: t16_cross_attention.py:CrossAttention.backward
# slip: d_x and d_memory are returned in swapped order
def backward(self, d_out, cache):
    """-> (d_x [B, N, d], d_memory [B, M, d_memory]) from d_out [B, N, d]."""
    d_merged = self.out.backward(d_out, cache.out)                     # undoes y = merged Wo
    B, N, _ = d_merged.shape
    H, H_kv, D = self.n_heads, self.n_kv_heads, self.head_dim
    d_mixed = d_merged.reshape(B, N, H, D).transpose(0, 2, 1, 3)       # undoes the merge of heads
    d_q, d_k, d_v = self.kernel.backward(d_mixed, cache.attn)          # undoes mixed = Attn(q, k, v)
    M = d_k.shape[2]
    # undoes k, v = the two halves of kv, split into heads
    d_kv = np.concatenate([d_k, d_v], axis=1).transpose(0, 2, 1, 3)    # [B, M, 2 H_kv, D]
    d_memory = self.kv.backward(d_kv.reshape(B, M, 2 * H_kv * D), cache.kv)   # undoes memory Wkv
    # undoes q = (x Wq) split into heads
    d_x = self.q.backward(d_q.transpose(0, 2, 1, 3).reshape(B, N, H * D), cache.q)
    return d_memory, d_x
