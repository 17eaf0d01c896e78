# exercise: seq2seq
# function: t17_seq2seq.py:EncoderDecoder.decode_backward
# correct: every layer's d_memory collected in a list and summed at the end
def decode_backward(self, d_logits, cache):
    if self.logits_bias is not None:
        self.logits_bias.grad += d_logits.reshape(-1, d_logits.shape[-1]).sum(axis=0)
    d_x = self.head.backward(d_logits, cache.head)
    if self.final_norm is not None:
        d_x = self.final_norm.backward(d_x, cache.final_norm)
    shares = []
    for i in range(len(self.blocks) - 1, -1, -1):
        d_x, share = self.blocks[i].backward(d_x, cache.blocks[i])
        shares.append(share)
    self.embed.backward(d_x, cache.embed)
    return sum(shares)
