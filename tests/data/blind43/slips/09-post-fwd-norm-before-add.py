# exercise: block
# function: t09_block.py:PostNormBlock.forward
# slip: the second norm is applied to the FFN's output before the residual add (Pre/Post mixed)
def forward(self, x, mask=None, positions=None, kv=None, **ffn_inputs):
    """x [B, N, d] -> (y [B, N, d], cache)."""
    attended, attn = self.attn.forward(x, mask, positions, kv)     # [B, N, d]
    h, norm1 = self.norm1.forward(x + attended)                     # residual 1, then Norm1
    fed, ffn = self.ffn.forward(h, **ffn_inputs)
    normed, norm2 = self.norm2.forward(fed)
    y = h + normed
    return y, BlockCache(norm1, attn, norm2, ffn)
