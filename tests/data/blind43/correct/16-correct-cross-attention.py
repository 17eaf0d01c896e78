# exercise: cross-attention
# function: t16_cross_attention.py:CrossAttention.backward
# correct: heads merged with einops-like reshapes through np.stack, k and v stacked on a new axis
def backward(self, d_out, cache):
    H, H_kv, D = self.n_heads, self.n_kv_heads, self.head_dim
    d_merged = self.out.backward(d_out, cache.out)
    B, N, _ = d_merged.shape
    d_mixed = np.swapaxes(d_merged.reshape(B, N, H, D), 1, 2)
    d_q, d_k, d_v = self.kernel.backward(d_mixed, cache.attn)
    M = d_k.shape[2]
    d_kv = np.stack([d_k, d_v], axis=1)                     # [B, 2, H_kv, M, D]
    d_kv = np.moveaxis(d_kv, 3, 1).reshape(B, M, 2 * H_kv * D)
    d_memory = self.kv.backward(d_kv, cache.kv)
    d_x = self.q.backward(np.swapaxes(d_q, 1, 2).reshape(B, N, H * D), cache.q)
    return d_x, d_memory
