# exercise: attention
# function: t04_attention.py:MultiHeadAttention.backward
# slip: the merged gradient is reshaped into heads without the transpose back to [B, H, N, D]
def backward(self, d_out, cache):
    """d_x [B, N, d] from d_out; adds into the Q/K/V and output projections' gradients."""
    if cache.cached_decode:
        raise NotImplementedError("backward through a KV-cached decode step is not "
                                  "supported: the KV cache is for inference")
    d_merged = self.out.backward(d_out, cache.out)          # undoes y = merged Wo: [B, N, H*D]
    B, N, _ = d_merged.shape
    # undoes merged = merge_heads(mixed)
    d_mixed = d_merged.reshape(B, self.n_heads, N, self.head_dim)
    d_q, d_k, d_v = self.kernel.backward(d_mixed, cache.attn)   # undoes mixed = Attn(q, k, v)
    if self.rope is not None:                               # undoes the rotation of q and k
        d_q = self.rope.backward(d_q, cache.q_rope)
        d_k = self.rope.backward(d_k, cache.k_rope)
    # undoes q, k, v = split_heads(qkv)
    d_heads = np.concatenate([d_q, d_k, d_v], axis=1)      # [B, H + 2 H_kv, N, D]
    d_qkv = d_heads.transpose(0, 2, 1, 3).reshape(B, N, -1)
    return self.qkv.backward(d_qkv, cache.qkv)             # undoes qkv = x [Wq | Wk | Wv]
