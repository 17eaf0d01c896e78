# exercise: block
# function: t09_block.py:PostNormBlock.backward
# slip: the FFN receives d_out, not the gradient that came back through Norm2
def backward(self, d_out, cache, **ffn_grads):
    """d_x from d_out [B, N, d], through Norm2, the FFN, Norm1 and the attention."""
    d_sum2 = self.norm2.backward(d_out, cache.norm2)                # undoes y = Norm2(h + fed)
    d_h = d_sum2 + self.ffn.backward(d_out, cache.ffn, **ffn_grads)   # undoes fed = FFN(h)
    d_sum1 = self.norm1.backward(d_h, cache.norm1)                  # undoes h = Norm1(x + attended)
    return d_sum1 + self.attn.backward(d_sum1, cache.attn)          # undoes attended = Attn(x)
