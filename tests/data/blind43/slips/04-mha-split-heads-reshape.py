# exercise: attention
# function: t04_attention.py:MultiHeadAttention.split_heads
# slip: the fused projection is split into heads by a reshape to [B, heads, N, D] without the transpose
def split_heads(self, qkv):
    """[B, N, (H + 2 H_kv) D] -> q [B, H, N, D], k and v [B, H_kv, N, D]."""
    B, N, _ = qkv.shape
    H, H_kv, D = self.n_heads, self.n_kv_heads, self.head_dim
    heads = qkv.reshape(B, H + 2 * H_kv, N, D)             # [B, heads, N, D]
    return heads[:, :H], heads[:, H:H + H_kv], heads[:, H + H_kv:]
