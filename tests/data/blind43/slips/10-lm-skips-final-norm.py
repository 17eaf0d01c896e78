# exercise: model
# function: t10_model.py:DecoderLM.backward
# slip: the final norm's backward is skipped
def backward(self, d_out, cache):
    """Accumulates every parameter's gradient; ids have none, so returns None. With MoE
    FFNs the load-balancing loss's gradient is added too (weight ``config.moe_aux_weight``)."""
    d_h = self.head.backward(d_out, cache.head)            # undoes logits = head(h)
    d_x = d_h
    # {} per block for dense FFNs; the share of the pooled MoE loss a router receives
    moe_grads = router_grads(cache.router, len(self.blocks), self.config.moe_aux_weight)
    for i in reversed(range(len(self.blocks))):            # undoes x = block_i(x), last first
        d_x = self.blocks[i].backward(d_x, cache.blocks[i], **moe_grads[i])
    return self.embed.backward(d_x, cache.embed)           # undoes x = embed(ids, positions)
