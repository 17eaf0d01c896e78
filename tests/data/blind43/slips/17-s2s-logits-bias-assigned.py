# exercise: seq2seq
# function: t17_seq2seq.py:EncoderDecoder.decode_backward
# slip: the logits bias's gradient is assigned, not accumulated
def decode_backward(self, d_logits, cache):
    """Accumulates the decoder's gradients; returns d_memory, summed over every layer."""
    if self.logits_bias is not None:
        self.logits_bias.grad = sum_over_positions(d_logits)         # forward: logits + bias
    d_x = self.head.backward(d_logits, cache.head)
    if self.final_norm is not None:
        d_x = self.final_norm.backward(d_x, cache.final_norm)
    d_memory = 0
    for block, block_cache in zip(reversed(self.blocks), reversed(cache.blocks)):
        d_x, d_read = block.backward(d_x, block_cache)
        d_memory = d_memory + d_read                                  # every layer read it
    self.embed.backward(d_x, cache.embed)
    return d_memory
