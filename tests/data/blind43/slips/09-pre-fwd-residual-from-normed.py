# exercise: block
# function: t09_block.py:PreNormBlock.forward
# slip: the residual adds the normalised input, not x
def forward(self, x, mask=None, positions=None, kv=None, **ffn_inputs):
    """x [B, N, d] -> (y [B, N, d], cache)."""
    a, norm1 = self.norm1.forward(x)                                # [B, N, d]
    attended, attn = self.attn.forward(a, mask, positions, kv)
    h = a + attended
    f, norm2 = self.norm2.forward(h)
    fed, ffn = self.ffn.forward(f, **ffn_inputs)
    y = h + fed                                                     # residual 2
    return y, BlockCache(norm1, attn, norm2, ffn)
