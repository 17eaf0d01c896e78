# exercise: block
# function: t09_block.py:PostNormBlock.backward
# slip: the first residual's gradient is forgotten in the Post-Norm backward
def backward(self, d_out, cache, **ffn_grads):
    """d_x from d_out [B, N, d], through Norm2, the FFN, Norm1 and the attention."""
    d_sum2 = self.norm2.backward(d_out, cache.norm2)                # undoes y = Norm2(h + fed)
    d_h = d_sum2 + self.ffn.backward(d_sum2, cache.ffn, **ffn_grads)   # undoes fed = FFN(h)
    d_sum1 = self.norm1.backward(d_h, cache.norm1)                  # undoes h = Norm1(x + attended)
    return self.attn.backward(d_sum1, cache.attn)          # undoes attended = Attn(x)
