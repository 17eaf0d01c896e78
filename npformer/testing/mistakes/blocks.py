"""Mistakes in the blocks (t09_block.py) and the decoder model around them (t10_model.py)."""
from .registry import mistake

PRE = "t09_block.PreNormBlock.backward"
PRE_RECHECK = "h = x + Attn(Norm1(x)), y = h + FFN(Norm2(h)): each residual passes its gradient on unchanged"
POST = "t09_block.PostNormBlock.backward"
POST_RECHECK = "h = Norm1(x + Attn(x)), y = Norm2(h + FFN(h)): each residual passes its gradient on"
HEAD = "t10_model.TiedHead.backward"
LM = "t10_model.DecoderLM.backward"
LM_RECHECK = "undo in reverse: head, final norm, the blocks from the last to the first, the embeddings"
PRE_FWD = "t09_block.PreNormBlock.forward"
HEAD_RECHECK = "d_E += (x^T d_logits)^T"

# -- PreNormBlock.backward --------------------------------------------------------------------------
mistake("prenorm-second-residual-dropped", PRE, "d_h = d_out + self.norm2.backward(d_f, cache.norm2)",
        "d_h = self.norm2.backward(d_f, cache.norm2)",
        "y = h + FFN(...): the residual carries d_y to h unchanged, plus the FFN path", PRE_RECHECK)
mistake("prenorm-first-residual-dropped", PRE, "return d_h + self.norm1.backward(d_a, cache.norm1)",
        "return self.norm1.backward(d_a, cache.norm1)",
        "h = x + Attn(...): the residual carries d_h to x unchanged, plus the attention path", PRE_RECHECK)
mistake("prenorm-norm2-skipped", PRE, "d_h = d_out + self.norm2.backward(d_f, cache.norm2)", "d_h = d_out + d_f",
        "the FFN read Norm2(h): its gradient goes back through Norm2", PRE_RECHECK)
mistake("prenorm-norm1-skipped", PRE, "return d_h + self.norm1.backward(d_a, cache.norm1)", "return d_h + d_a",
        "the attention read Norm1(x): its gradient goes back through Norm1", PRE_RECHECK)
mistake("prenorm-attention-gets-d-out", PRE, "d_a = self.attn.backward(d_h, cache.attn)",
        "d_a = self.attn.backward(d_out, cache.attn)",
        "the attention's output is added into h, so it receives d_h (which carries the FFN path), not d_out",
        PRE_RECHECK)
mistake("prenorm-ffn-extra-gradients-dropped", PRE, "self.ffn.backward(d_out, cache.ffn, **ffn_grads)",
        "self.ffn.backward(d_out, cache.ffn)",
        "the extra gradients for the FFN (an MoE router's) must be handed on to its backward", PRE_RECHECK)

# -- PostNormBlock.backward -------------------------------------------------------------------------
mistake("postnorm-ffn-residual-dropped", POST, "d_h = d_sum2 + self.ffn.backward(", "d_h = self.ffn.backward(",
        "y = Norm2(h + FFN(h)): h receives d_sum2 directly as well as through the FFN", POST_RECHECK)
mistake("postnorm-attention-residual-dropped", POST, "return d_sum1 + self.attn.backward(d_sum1, cache.attn)",
        "return self.attn.backward(d_sum1, cache.attn)",
        "h = Norm1(x + Attn(x)): x receives d_sum1 directly as well as through the attention", POST_RECHECK)
mistake("postnorm-residual-bypasses-norm", POST, "d_h = d_sum2 + self.ffn.backward(", "d_h = d_out + self.ffn.backward(",
        "the residual sum h + FFN(h) went through Norm2: the residual carries d_sum2, after Norm2's backward",
        POST_RECHECK)
mistake("postnorm-norm1-wrong-cache", POST, "d_sum1 = self.norm1.backward(d_h, cache.norm1)",
        "d_sum1 = self.norm1.backward(d_h, cache.norm2)", "each norm's backward needs its own cache", POST_RECHECK)
mistake("postnorm-norm1-skipped", POST, "d_sum1 = self.norm1.backward(d_h, cache.norm1)", "d_sum1 = d_h",
        "h = Norm1(x + attended): d_h goes back through Norm1's backward first", POST_RECHECK)
mistake("postnorm-attention-reads-d-h", POST, "return d_sum1 + self.attn.backward(d_sum1, cache.attn)",
        "return d_sum1 + self.attn.backward(d_h, cache.attn)",
        "the attention's output entered the sum before Norm1: its gradient is d_sum1, after Norm1's backward",
        POST_RECHECK)
mistake("postnorm-norm1-gets-d-sum2", POST, "d_sum1 = self.norm1.backward(d_h, cache.norm1)",
        "d_sum1 = self.norm1.backward(d_sum2, cache.norm1)",
        "h feeds the FFN and the second residual: Norm1's backward takes d_h, both paths summed",
        POST_RECHECK)
mistake("postnorm-norm2-wrong-cache", POST, "d_sum2 = self.norm2.backward(d_out, cache.norm2)",
        "d_sum2 = self.norm2.backward(d_out, cache.norm1)", "each norm's backward needs its own forward's cache",
        POST_RECHECK)

# -- PreNormBlock.forward ---------------------------------------------------------------------------
mistake("prenorm-forward-residual-from-normed", PRE_FWD, "h = x + attended", "h = a + attended",
        "the residual adds the block's input x, not its normalised copy: h = x + Attn(Norm1(x))", PRE_RECHECK)
mistake("prenorm-forward-norm2-reads-x", PRE_FWD, "f, norm2 = self.norm2.forward(h)", "f, norm2 = self.norm2.forward(x)",
        "the FFN reads Norm2(h), the stream after the attention's residual", PRE_RECHECK)
mistake("prenorm-attention-reads-x", PRE_FWD, "self.attn.forward(a, mask, positions, kv)",
        "self.attn.forward(x, mask, positions, kv)",
        "in a Pre-Norm block the attention reads Norm1(x), not x", "h = x + Attn(Norm1(x))")
mistake("prenorm-attention-without-mask-and-positions", PRE_FWD, "self.attn.forward(a, mask, positions, kv)",
        "self.attn.forward(a)", "the mask, the positions and the KV cache must reach the attention",
        "h = x + Attn(Norm1(x), mask, positions)")
mistake("prenorm-forward-second-residual-from-x", PRE_FWD, "y = h + fed", "y = x + fed",
        "the second residual adds to h = x + Attn(...), not to x: the attention's output is lost",
        PRE_RECHECK)
mistake("prenorm-forward-ffn-reads-h", PRE_FWD, "fed, ffn = self.ffn.forward(f, **ffn_inputs)",
        "fed, ffn = self.ffn.forward(h, **ffn_inputs)", "Pre-Norm: the FFN reads Norm2(h), not h itself",
        PRE_RECHECK)

# -- PostNormBlock.forward --------------------------------------------------------------------------
mistake("postnorm-forward-normalises-attention-only", "t09_block.PostNormBlock.forward",
        "h, norm1 = self.norm1.forward(x + attended)", "normed, norm1 = self.norm1.forward(attended)\n"
        "    h = x + normed", "Post-Norm normalises the residual sum: h = Norm1(x + Attn(x))", POST_RECHECK)
mistake("postnorm-second-residual-missing", "t09_block.PostNormBlock.forward", "self.norm2.forward(h + fed)",
        "self.norm2.forward(fed)", "Norm2 normalises the residual sum h + FFN(h), not FFN(h) alone",
        "y = Norm2(h + FFN(h))")
mistake("postnorm-forward-residual-dropped", "t09_block.PostNormBlock.forward",
        "h, norm1 = self.norm1.forward(x + attended)", "h, norm1 = self.norm1.forward(attended)",
        "Post-Norm normalises the residual sum x + Attn(x), not the attention output alone", POST_RECHECK)
mistake("postnorm-forward-ffn-reads-sum", "t09_block.PostNormBlock.forward",
        "fed, ffn = self.ffn.forward(h, **ffn_inputs)", "fed, ffn = self.ffn.forward(x + attended, **ffn_inputs)",
        "the FFN reads h = Norm1(x + Attn(x)), the normalised sum", POST_RECHECK)
mistake("postnorm-forward-normalises-ffn-only", "t09_block.PostNormBlock.forward",
        "y, norm2 = self.norm2.forward(h + fed)", "normed, norm2 = self.norm2.forward(fed)\n    y = h + normed",
        "Post-Norm normalises the residual sum: y = Norm2(h + FFN(h))", POST_RECHECK)

# -- TiedHead.backward ------------------------------------------------------------------------------
mistake("tied-head-assigned", HEAD, "self.weight.grad += d_weight_t.T", "self.weight.grad = d_weight_t.T",
        "the token table is used twice (lookup and head): the head must add its share, not replace it",
        HEAD_RECHECK)
mistake("tied-head-table-never-added", HEAD, "self.weight.grad += d_weight_t.T", "pass",
        "the head reads the token table: it must add its share (x^T d_logits)^T into the table's gradient",
        HEAD_RECHECK)
mistake("tied-head-outer-of-sums", HEAD, "self.weight.grad += d_weight_t.T",
        "self.weight.grad += np.outer(d_out.reshape(-1, d_out.shape[-1]).sum(axis=0), "
        "cache.x.reshape(-1, cache.x.shape[-1]).sum(axis=0))",
        "d_E sums each position's outer product d_logits^T x: the outer product of the sums is another matrix",
        HEAD_RECHECK)

# -- DecoderLM.backward -----------------------------------------------------------------------------
mistake("decoder-final-norm-skipped", LM, "d_x = self.norm.backward(d_h, cache.norm)", "d_x = d_h",
        "the head read the final norm's output: go back through the final norm", LM_RECHECK)
mistake("decoder-blocks-in-forward-order", LM, "for i in reversed(range(len(self.blocks))):",
        "for i in range(len(self.blocks)):", "the blocks are undone last first", LM_RECHECK)
mistake("decoder-embeddings-skipped", LM, "return self.embed.backward(d_x, cache.embed)", "return None",
        "the embeddings (token and position tables) receive no gradient", LM_RECHECK)
mistake("decoder-caches-not-reversed", LM, "cache.blocks[i], **moe_grads[i]",
        "cache.blocks[len(self.blocks) - 1 - i], **moe_grads[i]",
        "each block's backward runs with its own forward's cache", LM_RECHECK)
mistake("decoder-router-weight-missing", LM, "len(self.blocks), self.config.moe_aux_weight)", "len(self.blocks), 1.0)",
        "the pooled router loss enters the training loss times moe_aux_weight, and so does its gradient",
        LM_RECHECK)
mistake("decoder-router-grads-dropped", LM, "cache.blocks[i], **moe_grads[i])", "cache.blocks[i])",
        "with the pooled router loss each MoE block receives its share of that loss's gradient", LM_RECHECK)
mistake("decoder-extra-residual-around-blocks", LM, "d_x = self.blocks[i].backward(d_x, cache.blocks[i]",
        "d_x = d_x + self.blocks[i].backward(d_x, cache.blocks[i]",
        "a block's backward already carries its residual paths: adding d_x again counts the identity twice",
        LM_RECHECK)
mistake("decoder-block-gradients-not-chained", LM,
        "d_x = self.blocks[i].backward(d_x, cache.blocks[i], **moe_grads[i])",
        "d_block = self.blocks[i].backward(d_x, cache.blocks[i], **moe_grads[i])",
        "each block's input gradient is the next one's upstream: assign it back to d_x", LM_RECHECK)

# -- TiedHead.forward -------------------------------------------------------------------------------
mistake("tied-head-forward-scaled", "t10_model.TiedHead.forward", "linear_forward(x, self.weight.data.T)",
        "linear_forward(x, self.weight.data.T / np.sqrt(x.shape[-1]))",
        "the tied head is plain x E^T (no 1/sqrt(d))", "logits = x E^T")
mistake("tied-head-forward-scales-x", "t10_model.TiedHead.forward", "linear_forward(x, self.weight.data.T)",
        "linear_forward(x / np.sqrt(x.shape[-1]), self.weight.data.T)",
        "the tied head is plain x E^T (no 1/sqrt(d))", "logits = x E^T")
mistake("tied-head-forward-shifted", "t10_model.TiedHead.forward", "return linear_forward(x, self.weight.data.T)",
        "logits, cache = linear_forward(x, self.weight.data.T)\n"
        "    return logits - logits.max(axis=-1, keepdims=True), cache",
        "the head returns the logits x E^T; subtracting the maximum belongs inside the softmax", "logits = x E^T")
