"""Mistakes in the encoder (t15_encoder.py: mean pool, L2 normalisation, the stack) and the
encoder-decoder (t16_cross_attention.py, t17_seq2seq.py)."""
from .registry import mistake

POOL = "t15_encoder.mean_pool_backward"
L2 = "t15_encoder.l2_normalize_backward"
ENC = "t15_encoder.Encoder.backward"
CROSS = "t16_cross_attention.CrossAttention.backward"
BLOCK = "t17_seq2seq.EncoderDecoderBlock.backward"
SEQ = "t17_seq2seq.EncoderDecoder.decode_backward"
L2F = "t15_encoder.l2_normalize_forward"
CROSS_FWD = "t16_cross_attention.CrossAttention.forward"
POOL_RECHECK = "d_states[b, n] = m_bn d_pooled[b] / sum_n m_bn"
L2_RECHECK = "d_x = (d_y - y (y . d_y)) / |x|"
ENC_RECHECK = "undo in reverse: final norm, the blocks from the last to the first, the embeddings"
L2F_RECHECK = "y = x / max(|x|, eps)"
CROSS_RECHECK = "d_memory = [d_k | d_v] [Wk | Wv]^T"
BLOCK_RECHECK = "each residual passes its gradient on unchanged"
SEQ_RECHECK = "undo in reverse: head, final norm, the layers from the last to the first, the embeddings"

# -- mean_pool_backward -----------------------------------------------------------------------------
mistake("mean-pool-counts-padding", POOL, "return cache.weights[:, :, None] * d_pooled[:, None, :]",
        "return d_pooled[:, None, :] / cache.weights.shape[1] * np.ones(cache.weights.shape)[:, :, None]",
        "the mean is over the real tokens only: padding gets 0, the rest 1/count",
        POOL_RECHECK)
mistake("mean-pool-no-count", POOL, "return cache.weights[:, :, None] * d_pooled[:, None, :]",
        "return (cache.weights > 0)[:, :, None] * d_pooled[:, None, :]",
        "the 1/count of the mean is missing", POOL_RECHECK)
mistake("mean-pool-over-padded-length", POOL, "return cache.weights[:, :, None] * d_pooled[:, None, :]",
        "return (cache.weights > 0)[:, :, None] * d_pooled[:, None, :] / cache.weights.shape[1]",
        "the mean is over the real tokens: divide by their count, not by the padded length N",
        POOL_RECHECK)

# -- l2_normalize_backward --------------------------------------------------------------------------
mistake("l2-normalize-no-projection", L2, "across = d_out - y * np.sum(y * d_out, axis=-1, keepdims=True)",
        "across = d_out", "only the part of d_out across the sphere survives: subtract y (y . d_out)",
        L2_RECHECK)
mistake("l2-normalize-no-length", L2, "return np.where(cache.clamped, d_out, across) / length",
        "return np.where(cache.clamped, d_out, across)", "the result is divided by |x|",
        L2_RECHECK)
mistake("l2-normalize-dot-over-axis-0", L2, "np.sum(y * d_out, axis=-1, keepdims=True)",
        "np.sum(y * d_out, axis=0, keepdims=True)", "the dot y . d_out runs over each vector's d features",
        L2_RECHECK)
mistake("l2-normalize-clamp-ignored", L2, "return np.where(cache.clamped, d_out, across) / length",
        "return across / length", "where |x| < eps the forward only divided by eps: there the gradient is "
        "d_out / eps, without the projection", L2_RECHECK)
mistake("l2-normalize-dot-without-y", L2, "np.sum(y * d_out, axis=-1, keepdims=True)", "np.sum(d_out, axis=-1, keepdims=True)",
        "the part removed lies along y: y (y . d_out), the dot product of y with d_out",
        L2_RECHECK)
mistake("l2-normalize-projection-sign", L2, "across = d_out - y * np.sum(y * d_out, axis=-1, keepdims=True)",
        "across = d_out + y * np.sum(y * d_out, axis=-1, keepdims=True)",
        "the part of d_out along y is removed, not added", L2_RECHECK)
mistake("l2-normalize-length-squared", L2, "return np.where(cache.clamped, d_out, across) / length",
        "return np.where(cache.clamped, d_out, across) / length ** 2",
        "y = x / |x| is divided by |x| once, and so is its gradient", L2_RECHECK)
mistake("l2-normalize-projection-with-x", L2, "across = d_out - y * np.sum(y * d_out, axis=-1, keepdims=True)",
        "across = d_out - length * y * np.sum(y * d_out, axis=-1, keepdims=True)",
        "written with x, the projection is x (x . d_y) / |x|^2: one factor of |x| is missing",
        L2_RECHECK)

# -- Encoder.backward -------------------------------------------------------------------------------
mistake("encoder-blocks-in-forward-order", ENC, "zip(reversed(self.blocks), reversed(cache.blocks))",
        "zip(self.blocks, cache.blocks)", "the blocks are undone last first",
        ENC_RECHECK)
mistake("encoder-final-norm-skipped", ENC, "d_x = self.final_norm.backward(d_x, cache.final_norm)", "d_x = d_x",
        "the output went through the final norm: go back through it first",
        ENC_RECHECK)
mistake("encoder-embeddings-get-d-out", ENC, "return self.embed.backward(d_x, cache.embed)",
        "return self.embed.backward(d_out, cache.embed)",
        "the embeddings receive the gradient after every block's backward (d_x), not the output's",
        ENC_RECHECK)
mistake("encoder-caches-not-reversed", ENC, "zip(reversed(self.blocks), reversed(cache.blocks))",
        "zip(reversed(self.blocks), cache.blocks)", "each block is undone with its own cache: reverse both",
        ENC_RECHECK)
mistake("encoder-caches-reversed-blocks-not", ENC, "zip(reversed(self.blocks), reversed(cache.blocks))",
        "zip(self.blocks, reversed(cache.blocks))",
        "each block's backward needs its own cache: reverse the blocks and their caches together",
        ENC_RECHECK)
mistake("encoder-embeddings-skipped", ENC, "return self.embed.backward(d_x, cache.embed)", "return None",
        "the ids get no gradient, but the embedding tables (and their norm) do: run the embeddings' backward",
        ENC_RECHECK)

# -- mean_pool_forward ------------------------------------------------------------------------------
mistake("mean-pool-forward-over-padded-length", "t15_encoder.mean_pool_forward",
        "weights = real / np.maximum(count, 1)", "weights = real / N",
        "the mean is over the real tokens: divide by their count, not the padded length N",
        "v_b = sum_n m_bn s_bn / sum_n m_bn")
mistake("mean-pool-forward-unguarded", "t15_encoder.mean_pool_forward", "real / np.maximum(count, 1)",
        "real / count", "a row without real tokens has count 0: guard it (its mean is 0, not 0/0)",
        "v_b = sum_n m_bn s_bn / max(sum_n m_bn, 1)")
mistake("mean-pool-forward-mask-ignored", "t15_encoder.mean_pool_forward",
        "real = np.ones((B, N), states.dtype) if key_mask is None else key_mask.astype(states.dtype)",
        "real = np.ones((B, N), states.dtype)", "padding positions must not enter the mean: use the key mask",
        "v_b = sum_n m_bn s_bn / sum_n m_bn")

# -- l2_normalize_forward ---------------------------------------------------------------------------
mistake("l2-normalize-forward-squared-length", L2F, "norm = np.sqrt(np.sum(x * x, axis=-1, keepdims=True))",
        "norm = np.sum(x * x, axis=-1, keepdims=True)", "the length is the square root of the sum of squares",
        L2F_RECHECK)
mistake("l2-normalize-forward-adds-eps", L2F, "length = np.where(clamped, x.dtype.type(eps), norm)",
        "length = norm + eps", "the length is max(|x|, eps), not |x| + eps", L2F_RECHECK)
mistake("l2-normalize-forward-whole-array", L2F, "norm = np.sqrt(np.sum(x * x, axis=-1, keepdims=True))",
        "norm = np.sqrt(np.sum(x * x))", "each vector is divided by its own length (the sum over its last axis)",
        "y = x / max(|x|, eps), |x| over the last axis")

# -- CrossAttention.backward ------------------------------------------------------------------------
mistake("cross-attention-k-and-v-swapped", CROSS, "np.concatenate([d_k, d_v], axis=1)",
        "np.concatenate([d_v, d_k], axis=1)", "the memory's projection is [Wk | Wv]: its gradient in that order",
        CROSS_RECHECK)
mistake("cross-attention-wo-skipped", CROSS, "d_merged = self.out.backward(d_out, cache.out)", "d_merged = d_out",
        "the output projection Wo has a backward too", "undo in reverse: Wo, merge heads, attention, Wq and Wkv")
mistake("cross-attention-dq-without-transpose", CROSS, "d_q.transpose(0, 2, 1, 3).reshape(B, N, H * D)",
        "d_q.reshape(B, N, H * D)", "the heads axis goes back behind the positions before flattening d_q",
        "undo in reverse: Wo, merge heads, attention, Wq and Wkv")
mistake("cross-attention-kv-heads-not-moved-back", CROSS, "np.concatenate([d_k, d_v], axis=1).transpose(0, 2, 1, 3)",
        "np.concatenate([d_k, d_v], axis=1)",
        "the heads came from [B, M, 2 H_kv, D]: move the heads axis back behind the positions",
        CROSS_RECHECK)
mistake("cross-attention-kv-joined-on-features", CROSS, "np.concatenate([d_k, d_v], axis=1)",
        "np.concatenate([d_k, d_v], axis=-1)",
        "the kv projection's columns are all key heads, then all value heads: join d_k and d_v on the "
        "heads axis", CROSS_RECHECK)
mistake("cross-attention-heads-not-split-back", CROSS, "d_merged.reshape(B, N, H, D).transpose(0, 2, 1, 3)",
        "d_merged.reshape(B, H, N, D)", "the merged features are [B, N, H*D]: split them per position, then move "
        "the heads forward", "undo in reverse: Wo, merge heads, attention, Wq and Wkv")

# -- EncoderDecoderBlock.backward -------------------------------------------------------------------
mistake("decoder-block-cross-residual-dropped", BLOCK,
        "d_h = d_g + self.cross_norm.backward(d_c, cache.cross_norm)",
        "d_h = self.cross_norm.backward(d_c, cache.cross_norm)",
        "g = h + Cross(...): the residual carries d_g to h unchanged, plus the cross-attention path",
        BLOCK_RECHECK)
mistake("decoder-block-post-norm-second-use", BLOCK, "d_h = d_h + d_sum2", "d_h = d_h",
        "h reaches g = Nc(h + Cross(h, mem)) twice: through the cross-attention and directly",
        BLOCK_RECHECK)
mistake("decoder-block-self-attention-reads-d-g", BLOCK, "d_a = self.attn.backward(d_h, cache.attn)",
        "d_a = self.attn.backward(d_g, cache.attn)",
        "the self-attention's output entered h, so its gradient is d_h (which carries the cross path)",
        BLOCK_RECHECK)
mistake("decoder-block-cross-norm-skipped", BLOCK, "d_g + self.cross_norm.backward(d_c, cache.cross_norm)",
        "d_g + d_c", "the cross-attention read Nc(h): its gradient goes back through Nc before reaching h",
        "each residual passes its gradient on unchanged; each norm has a backward")
mistake("decoder-block-ffn-residual-dropped", BLOCK, "d_g = d_out + self.norm2.backward(d_f, cache.norm2)",
        "d_g = self.norm2.backward(d_f, cache.norm2)", "y = g + FFN(N2(g)): the residual passes d_out on to g",
        BLOCK_RECHECK)
mistake("decoder-block-self-residual-dropped", BLOCK, "d_x = d_h + self.norm1.backward(d_a, cache.norm1)",
        "d_x = self.norm1.backward(d_a, cache.norm1)", "h = x + Attn(N1(x)): the residual passes d_h on to x",
        BLOCK_RECHECK)
mistake("decoder-block-cross-reads-d-out", BLOCK, "self.cross_attn.backward(d_g, cache.cross_attn)",
        "self.cross_attn.backward(d_out, cache.cross_attn)",
        "the cross-attention's output entered g: its gradient is d_g, which carries the FFN path",
        BLOCK_RECHECK)
mistake("decoder-block-post-ffn-residual-dropped", BLOCK, "d_g = d_sum3 + self.ffn.backward(d_sum3, cache.ffn)",
        "d_g = self.ffn.backward(d_sum3, cache.ffn)", "N2 normalised g + FFN(g): g also receives d_sum3 directly",
        BLOCK_RECHECK)
mistake("decoder-block-post-self-residual-dropped", BLOCK, "d_x = d_sum1 + self.attn.backward(d_sum1, cache.attn)",
        "d_x = self.attn.backward(d_sum1, cache.attn)", "N1 normalised x + Attn(x): x also receives d_sum1 directly",
        BLOCK_RECHECK)
mistake("decoder-block-cross-norm-wrong-cache", BLOCK, "self.cross_norm.backward(d_c, cache.cross_norm)",
        "self.cross_norm.backward(d_c, cache.norm1)", "each norm's backward needs its own forward's cache",
        "each residual passes its gradient on unchanged; each norm has a backward")

# -- EncoderDecoder.decode_backward -----------------------------------------------------------------
mistake("decoder-memory-last-layer-only", SEQ, "d_memory = d_memory + d_read", "d_memory = d_read",
        "every decoder layer read the memory: their gradients add up",
        "d_memory = sum over the layers of d_read")
mistake("decode-logits-bias-mean", SEQ, "sum_over_positions(d_logits)",
        "d_logits.reshape(-1, d_logits.shape[-1]).mean(axis=0)",
        "the logits bias is added at every position: its gradient is the sum over positions, not the mean",
        "d_bias = sum over positions of d_logits")
mistake("decode-final-norm-skipped", SEQ, "d_x = self.final_norm.backward(d_x, cache.final_norm)", "d_x = d_x",
        "the decoder ends in a final norm: undo it right after the head", SEQ_RECHECK)
mistake("decode-logits-bias-assigned", SEQ, "self.logits_bias.grad += sum_over_positions(d_logits)",
        "self.logits_bias.grad = sum_over_positions(d_logits)", "logits_bias.grad is accumulated (+=)",
        "logits_bias.grad += sum over positions of d_logits")
mistake("decode-blocks-in-forward-order", SEQ, "zip(reversed(self.blocks), reversed(cache.blocks))",
        "zip(self.blocks, cache.blocks)", "the decoder layers are undone last first",
        SEQ_RECHECK)
mistake("decode-embeddings-skipped", SEQ, "self.embed.backward(d_x, cache.embed)", "None",
        "the target embeddings receive the gradient that reaches the bottom of the decoder",
        SEQ_RECHECK)

# -- CrossAttention.forward -------------------------------------------------------------------------
mistake("cross-attention-mask-not-passed", "t16_cross_attention.CrossAttention.forward",
        "mixed, attn_cache = self.kernel.forward(q, k, v, mask)", "mixed, attn_cache = self.kernel.forward(q, k, v)",
        "the source padding mask never reaches the attention: the target reads padded source positions",
        "attention over the memory where may_read")
mistake("cross-attention-kv-interleaved", CROSS_FWD, "k, v = kv[:, :H_kv], kv[:, H_kv:]", "k, v = kv[:, 0::2], kv[:, 1::2]",
        "the kv projection's columns are [K | V], all key heads first", "k = kv[:, :H_kv], v = kv[:, H_kv:]")
mistake("cross-attention-merge-without-transpose", CROSS_FWD, "merged = mixed.transpose(0, 2, 1, 3).reshape(B, N, H * D)",
        "merged = mixed.reshape(B, N, H * D)", "put the heads side by side per position: [B, N, H, D] first",
        "[B, H, N, D] -> [B, N, H*D]")
mistake("cross-attention-forward-k-and-v-swapped", CROSS_FWD, "k, v = kv[:, :H_kv], kv[:, H_kv:]",
        "v, k = kv[:, :H_kv], kv[:, H_kv:]", "the kv projection's columns are [K | V]: keys first",
        "k = kv[:, :H_kv], v = kv[:, H_kv:]")
mistake("cross-attention-kv-reshaped-without-transpose", CROSS_FWD,
        "kv_flat.reshape(B, M, 2 * H_kv, D).transpose(0, 2, 1, 3)", "kv_flat.reshape(B, 2 * H_kv, M, D)",
        "the features of each position split into heads: [B, M, 2 H_kv, D], then swap M and the heads",
        "[B, M, 2 H_kv D] -> [B, M, 2 H_kv, D] -> [B, 2 H_kv, M, D]")
mistake("cross-attention-causal", CROSS_FWD, "self.kernel.forward(q, k, v, mask)",
        "self.kernel.forward(q, k, v, mask, causal=True)",
        "cross-attention is not causal: every target position may read every real source position",
        "weights = softmax(q k^T / sqrt(D)) where the source is not padding")
