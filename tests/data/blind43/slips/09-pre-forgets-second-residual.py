# exercise: block
# function: t09_block.py:PreNormBlock.backward
# slip: the second residual's gradient is forgotten: d_out does not reach h directly
def backward(self, d_out, cache, **ffn_grads):
    """d_x from d_out [B, N, d]; ``ffn_grads`` go to a variant's FFN (see the class)."""
    d_f = self.ffn.backward(d_out, cache.ffn, **ffn_grads)     # undoes fed = FFN(f)
    d_h = self.norm2.backward(d_f, cache.norm2)         # undoes y = h + fed, f = Norm2(h)
    d_a = self.attn.backward(d_h, cache.attn)                   # undoes attended = Attn(a)
    return d_h + self.norm1.backward(d_a, cache.norm1)          # undoes h = x + attended, a = Norm1(x)
