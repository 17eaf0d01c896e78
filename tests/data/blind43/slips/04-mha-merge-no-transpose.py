# exercise: attention
# function: t04_attention.py:MultiHeadAttention.merge_heads
# slip: the heads are merged by a reshape without the transpose: positions and heads mixed up
def merge_heads(self, mixed):
    """[B, H, N, D] -> [B, N, H*D]: the heads side by side again."""
    B, H, N, D = mixed.shape
    return mixed.reshape(B, N, H * D)
