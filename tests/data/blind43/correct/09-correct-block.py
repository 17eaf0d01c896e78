# exercise: block
# function: t09_block.py:PreNormBlock.backward
# correct: the two residual sums written as named gradients, each branch first
def backward(self, d_out, cache, **ffn_grads):
    d_y = d_out
    d_fed = d_y
    d_f = self.ffn.backward(d_fed, cache.ffn, **ffn_grads)
    d_h_branch = self.norm2.backward(d_f, cache.norm2)
    d_h = d_y + d_h_branch
    d_attended = d_h
    d_a = self.attn.backward(d_attended, cache.attn)
    d_x_branch = self.norm1.backward(d_a, cache.norm1)
    d_x = d_h + d_x_branch
    return d_x
