# exercise: encoder
# function: t15_encoder.py:Encoder.backward
# slip: the blocks are undone in forward order
def backward(self, d_out, cache):
    """Accumulates every parameter's gradient; ids have none, so returns None."""
    d_x = d_out
    if self.final_norm is not None:
        d_x = self.final_norm.backward(d_x, cache.final_norm)
    for block, block_cache in zip(self.blocks, cache.blocks):
        d_x = block.backward(d_x, block_cache)
    return self.embed.backward(d_x, cache.embed)
