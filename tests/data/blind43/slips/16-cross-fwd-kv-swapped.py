# exercise: cross-attention
# function: t16_cross_attention.py:CrossAttention.forward
# slip: keys and values are taken from the wrong halves of the fused projection
def forward(self, x, memory, mask=None):
    """x [B, N, d] reading memory [B, M, d_memory] -> (y [B, N, d], cache)."""
    check_reader_and_memory(x, check_float("memory", memory, self.kv.weight.dtype))
    B, N, _ = x.shape
    M = memory.shape[1]
    H, H_kv, D = self.n_heads, self.n_kv_heads, self.head_dim
    mask = check_mask(mask, (B, H, N, M))
    q_flat, q_cache = self.q.forward(x)                                # [B, N, H*D]
    kv_flat, kv_cache = self.kv.forward(memory)                        # [B, M, 2*H_kv*D]
    q = q_flat.reshape(B, N, H, D).transpose(0, 2, 1, 3)               # [B, H, N, D]
    kv = kv_flat.reshape(B, M, 2 * H_kv, D).transpose(0, 2, 1, 3)      # [B, 2 H_kv, M, D]
    v, k = kv[:, :H_kv], kv[:, H_kv:]
    mixed, attn_cache = self.kernel.forward(q, k, v, mask)             # [B, H, N, D]
    merged = mixed.transpose(0, 2, 1, 3).reshape(B, N, H * D)
    y, out_cache = self.out.forward(merged)
    return y, CrossAttentionCache(q_cache, kv_cache, attn_cache, out_cache)
