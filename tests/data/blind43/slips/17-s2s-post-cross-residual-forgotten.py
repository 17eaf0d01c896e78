# exercise: seq2seq
# function: t17_seq2seq.py:EncoderDecoderBlock.backward
# slip: the cross-attention's residual gradient is forgotten (Post-Norm)
def backward(self, d_out, cache):
    """-> (d_x, d_memory); the caller sums d_memory over layers."""
    if self.prenorm:
        d_f = self.ffn.backward(d_out, cache.ffn)                      # undoes fed = FFN(f)
        d_g = d_out + self.norm2.backward(d_f, cache.norm2)            # undoes y = g + fed, f = N2(g)
        d_c, d_memory = self.cross_attn.backward(d_g, cache.cross_attn)   # undoes read = Cross(c, mem)
        d_h = d_g + self.cross_norm.backward(d_c, cache.cross_norm)    # undoes g = h + read, c = Nc(h)
        d_a = self.attn.backward(d_h, cache.attn)                      # undoes attended = Attn(a)
        d_x = d_h + self.norm1.backward(d_a, cache.norm1)              # undoes h = x + attended
    else:
        d_sum3 = self.norm2.backward(d_out, cache.norm2)               # undoes y = N2(g + fed)
        d_g = d_sum3 + self.ffn.backward(d_sum3, cache.ffn)            # undoes fed = FFN(g)
        d_sum2 = self.cross_norm.backward(d_g, cache.cross_norm)       # undoes g = Nc(h + read)
        d_h, d_memory = self.cross_attn.backward(d_sum2, cache.cross_attn)   # undoes read = Cross(h, mem)
        d_sum1 = self.norm1.backward(d_h, cache.norm1)                 # undoes h = N1(x + attended)
        d_x = d_sum1 + self.attn.backward(d_sum1, cache.attn)          # undoes attended = Attn(x)
    return d_x, d_memory
