"""Mistakes in attention, multi-head and grouped-query attention (t04_attention.py), RoPE
(t05_rope.py), the KV cache (t13_kv_cache.py) and blockwise attention (t18_flash_attention.py)."""
from .registry import mistake

ATT = "t04_attention.attention_backward"
ATT_RECHECK = ("d_weights = d_out v^T;  d_v = weights^T d_out;  d_scores = softmax backward;  "
               "d_q = d_scores k / sqrt(D);  d_k = d_scores^T q / sqrt(D)")
D_Q = "d_q = d_scores @ k * scale"
D_K = "d_k = d_scores.swapaxes(-1, -2) @ q * scale"
mistake("attention-dk-scale", ATT, D_K, "d_k = d_scores.swapaxes(-1, -2) @ q",
        "d_k lost the scale 1/sqrt(D): the scores were q k^T / sqrt(D)", ATT_RECHECK)
mistake("attention-dq-scale", ATT, D_Q, "d_q = d_scores @ k",
        "d_q lost the scale 1/sqrt(D): the scores were q k^T / sqrt(D)", ATT_RECHECK)
mistake("attention-scale-squared", ATT, D_Q, "d_q = d_scores @ k * scale * scale",
        "d_q is scaled by 1/sqrt(D) once, not twice", ATT_RECHECK)
mistake("attention-softmax-skipped", ATT, "d_scores = softmax_backward(d_weights, cache.softmax)",
        "d_scores = d_weights", "the gradient must go back through the softmax before the scores",
        ATT_RECHECK)
mistake("attention-softmax-diagonal", ATT, "d_scores = softmax_backward(d_weights, cache.softmax)",
        "d_scores = weights * (1 - weights) * d_weights",
        "the softmax backward needs the whole row, not only its diagonal: "
        "weights * (d_weights - sum_j d_weights_j weights_j)", ATT_RECHECK)
mistake("attention-dq-reads-values", ATT, D_Q, "d_q = d_scores @ v * scale",
        "d_q multiplies d_scores by the keys k, not the values v", ATT_RECHECK)
mistake("attention-dv-from-scores", ATT, "d_v = weights.swapaxes(-1, -2) @ d_out",
        "d_v = softmax_backward(d_weights, cache.softmax).swapaxes(-1, -2) @ d_out",
        "d_v = weights^T d_out: the weights themselves, not the scores' gradient", ATT_RECHECK)
FWD = "t04_attention.attention_forward"
mistake("attention-forward-mask-ignored", FWD, "softmax_forward(scores, mask=mask)", "softmax_forward(scores)",
        "the mask is never applied: keys a query may not read still get weight",
        "weights = softmax(scores) where may_read")
mistake("attention-forward-no-scale", FWD, "scores = q @ k.swapaxes(-1, -2) * scale",
        "scores = q @ k.swapaxes(-1, -2)", "the scores are divided by sqrt(D)", "scores = q k^T / sqrt(D)")
mistake("attention-forward-scale-by-D", FWD, "scale = 1.0 / math.sqrt(D) if scale is None",
        "scale = 1.0 / D if scale is None", "the scale is 1/sqrt(D), not 1/D", "scores = q k^T / sqrt(D)")
READ = "t04_attention.may_read"
mistake("may-read-not-itself", READ, "allowed = key_pos <= query_pos", "allowed = key_pos < query_pos",
        "a position also reads itself: key <= query", "may read: key_pos <= query_pos")
mistake("may-read-window-one-more", READ, "key_pos > query_pos - window", "key_pos >= query_pos - window",
        "a window of W keeps the W most recent keys, the query's own included: key > query - W",
        "may read: query - W < key_pos <= query_pos")

# -- multi-head attention ------------------------------------------------------------------------
MHA = "t04_attention.MultiHeadAttention.backward"
MHA_RECHECK = "undo in reverse: Wo, merge heads, attention, RoPE on q and k, split heads, [Wq | Wk | Wv]"
mistake("mha-rope-k-forgotten", MHA, "d_k = self.rope.backward(d_k, cache.k_rope)", "d_k = d_k",
        "k was rotated by RoPE too: its gradient must be rotated back as well", MHA_RECHECK)
mistake("mha-rope-q-forgotten", MHA, "d_q = self.rope.backward(d_q, cache.q_rope)", "d_q = d_q",
        "q was rotated by RoPE: its gradient must be rotated back", MHA_RECHECK)
mistake("mha-wo-skipped", MHA, "d_merged = self.out.backward(d_out, cache.out)", "d_merged = d_out",
        "the output projection Wo has a backward too (and Wo's gradient)", MHA_RECHECK)
mistake("mha-heads-from-positions", MHA,
        "d_merged.reshape(B, N, self.n_heads, self.head_dim).transpose(0, 2, 1, 3)",
        "d_merged.reshape(B, self.n_heads, N, self.head_dim)",
        "the heads sit in the feature axis: reshape to [B, N, H, D], then swap N and H", MHA_RECHECK)
mistake("mha-k-and-v-swapped", MHA, "np.concatenate([d_q, d_k, d_v], axis=1)",
        "np.concatenate([d_q, d_v, d_k], axis=1)", "the gradients go back in the order [q | k | v] of the "
        "fused projection", MHA_RECHECK)
mistake("mha-heads-not-moved-back", MHA, "d_heads.transpose(0, 2, 1, 3).reshape(B, N, -1)",
        "d_heads.reshape(B, N, -1)", "before merging, the heads axis goes back behind the positions "
        "([B, heads, N, D] -> [B, N, heads, D])", MHA_RECHECK)
mistake("mha-merge-without-transpose", "t04_attention.MultiHeadAttention.merge_heads",
        "mixed.transpose(0, 2, 1, 3).reshape(B, N, H * D)", "mixed.reshape(B, N, H * D)",
        "merging needs [B, N, H, D] first: swap H and N before the reshape", "[B, H, N, D] -> [B, N, H*D]")

# -- grouped-query attention and the KV cache ---------------------------------------------------------
GQA = "t04_attention.grouped_attention_backward"
GQA_RECHECK = "a shared head's gradient is the sum over its group: sum_groups(d_k_heads, group)"
GQA_RETURN = "return d_q, sum_groups(d_k_heads, group), sum_groups(d_v_heads, group)"
mistake("gqa-no-group-sum", GQA, GQA_RETURN, "return d_q, d_k_heads[:, ::group], d_v_heads[:, ::group]",
        "a key/value head shared by a group receives the sum of the group's gradients, not one "
        "query head's", GQA_RECHECK)
mistake("gqa-group-mean", GQA, GQA_RETURN,
        "return d_q, sum_groups(d_k_heads, group) / group, sum_groups(d_v_heads, group) / group",
        "a shared head receives the sum of its group's gradients, not their mean", GQA_RECHECK)
mistake("gqa-groups-by-stride", GQA, GQA_RETURN,
        "return d_q, d_k_heads.reshape(d_k_heads.shape[0], group, -1, *d_k_heads.shape[2:]).sum(axis=1), "
        "d_v_heads.reshape(d_v_heads.shape[0], group, -1, *d_v_heads.shape[2:]).sum(axis=1)",
        "the groups are consecutive query heads (head h reads key/value head h // group), not heads "
        "h, h + H_kv, ...", GQA_RECHECK)
mistake("gqa-forward-tiled", "t04_attention.grouped_attention_forward",
        "attention_forward(q, repeat_kv(k, group), repeat_kv(v, group)",
        "attention_forward(q, np.tile(k, (1, group, 1, 1)), np.tile(v, (1, group, 1, 1))",
        "np.tile interleaves the groups (head h reads k[h % H_kv]); each head is repeated group times "
        "in a row (h // group)", "query head h reads key/value head h // (H / H_kv)")
mistake("kv-cache-returns-new-keys-only", "t13_kv_cache.LayerKV.write",
        "return self.k[:, :, :start + n], self.v[:, :, :start + n]",
        "return self.k[:, :, start:start + n], self.v[:, :, start:start + n]",
        "the new query must read every key so far, not only the new ones", "keys 0 .. length + n")

# -- RoPE ---------------------------------------------------------------------------------------
ROT = "t05_rope.Rotary.backward"
ROT_RECHECK = "d_x = R_p^T d_out: turned back by -θ (cos θ stays, sin θ changes sign)"
ROT_CALL = "return rotate(d_out, cache.cos, -cache.sin, self.layout, self.rotated)"
mistake("rope-turned-forward-again", ROT, ROT_CALL, "return rotate(d_out, cache.cos, cache.sin, self.layout, self.rotated)",
        "the gradient is turned by +θ again; the backward turns it back by -θ", ROT_RECHECK)
mistake("rope-half-layout-only", ROT, ROT_CALL, "return rotate(d_out, cache.cos, -cache.sin, 'half', self.rotated)",
        "the pair layout is hard-coded as 'half': use the layer's own (interleaved pairs 2i, 2i+1)",
        ROT_RECHECK)
mistake("rope-interleaved-layout-only", ROT, ROT_CALL,
        "return rotate(d_out, cache.cos, -cache.sin, 'interleaved', self.rotated)",
        "the pair layout is hard-coded as 'interleaved': use the layer's own (half: i pairs with i + D/2)",
        ROT_RECHECK)
mistake("rope-backward-skipped", ROT, ROT_CALL, "return d_out",
        "the gradient is passed through unrotated", ROT_RECHECK)
mistake("rope-angles-positive-exponent", "t05_rope.Rotary.angles",
        "self.base ** (-np.arange(0, self.rotated, 2) / self.rotated)",
        "self.base ** (np.arange(0, self.rotated, 2) / self.rotated)",
        "the frequencies fall with the pair index: w_c = base^(-2c / D_rot)", "θ = p base^(-2c / D_rot)")
mistake("rope-rotate-sign", "t05_rope.rotate", "out_b[...] = a * sin + b * cos", "out_b[...] = -a * sin + b * cos",
        "the second coordinate is a sin θ + b cos θ", "(a, b) -> (a cos θ - b sin θ, a sin θ + b cos θ)")

# -- blockwise attention --------------------------------------------------------------------------
FLASH = "t18_flash_attention.flash_attention_backward"
FLASH_RECHECK = "d_s = p (d_p - delta) scale, delta_i = sum_d d_out_id out_id"
mistake("flash-no-delta", FLASH, "delta = np.sum(d_out * cache.out, axis=-1, keepdims=True)", "delta = 0",
        "the softmax correction delta = sum(d_out * out) over the head width is missing", FLASH_RECHECK)
mistake("flash-no-scale", FLASH, "d_scores = p * (d_p - delta) * cache.scale", "d_scores = p * (d_p - delta)",
        "the scores were scaled by 1/sqrt(D): d_scores carries the scale", FLASH_RECHECK)
mistake("flash-no-group-sum", FLASH, "return d_q, sum_groups(d_k_heads, group), sum_groups(d_v_heads, group)",
        "return d_q, d_k_heads[:, ::group], d_v_heads[:, ::group]",
        "a key/value head shared by a group receives the sum of the group's gradients", FLASH_RECHECK)

# -- more shapes of the same mistakes -----------------------------------------------------------
mistake("attention-dv-scaled", ATT, "d_v = weights.swapaxes(-1, -2) @ d_out", "d_v = weights.swapaxes(-1, -2) @ d_out * scale",
        "only the scores are scaled; v enters through weights @ v, so d_v has no 1/sqrt(D)", ATT_RECHECK)
mistake("attention-backward-own-scale", ATT, (D_Q, D_K),
        ("d_q = d_scores @ k / np.sqrt(q.shape[-1])", "d_k = d_scores.swapaxes(-1, -2) @ q / np.sqrt(q.shape[-1])"),
        "the backward recomputes 1/sqrt(D) instead of using the forward's scale (cache.scale): a custom "
        "scale is lost", ATT_RECHECK)
mistake("attention-weights-recomputed-unmasked", ATT,
        "q, k, v, weights, scale = cache.q, cache.k, cache.v, cache.weights, cache.scale",
        "q, k, v, scale = cache.q, cache.k, cache.v, cache.scale\n"
        "    weights = softmax_forward(q @ k.swapaxes(-1, -2) * scale)[0]",
        "the weights recomputed in the backward leave the mask out: use the forward's (cache.weights)",
        ATT_RECHECK)
mistake("attention-forward-mask-after-softmax", FWD, "weights, softmax = softmax_forward(scores, mask=mask)",
        "weights, softmax = softmax_forward(scores)\n    weights = weights if mask is None else weights * mask",
        "the mask acts on the scores before the softmax; zeroing weights after it leaves rows that do "
        "not sum to 1", "weights = softmax(scores) where may_read")
mistake("mha-split-without-transpose", "t04_attention.MultiHeadAttention.split_heads",
        ("heads = qkv.reshape(B, N, H + 2 * H_kv, D)", "heads = heads.transpose(0, 2, 1, 3)"),
        ("heads = qkv.reshape(B, H + 2 * H_kv, N, D)", "heads = heads"),
        "reshaping [B, N, features] straight to [B, heads, N, D] mixes positions into heads: reshape to "
        "[B, N, heads, D], then swap N and heads", "[B, N, (H + 2 H_kv) D] -> [B, N, heads, D] -> [B, heads, N, D]")
mistake("mha-qkv-backward-by-hand", MHA, "return self.qkv.backward(d_qkv, cache.qkv)",
        "return d_qkv @ self.qkv.weight.data.T",
        "d_x is computed by hand, so the fused Q/K/V projection never adds its weight gradient: call its "
        "backward", MHA_RECHECK)
mistake("rope-backward-drops-passthrough", ROT, ROT_CALL,
        "return np.where(np.arange(d_out.shape[-1]) < self.rotated, "
        "rotate(d_out, cache.cos, -cache.sin, self.layout, self.rotated), 0)",
        "features past the rotated width pass through the forward unchanged, so their gradient passes "
        "through too", ROT_RECHECK)
mistake("rotate-without-copy", "t05_rope.rotate", "out = x.copy()", "out = x",
        "without a copy, out and x share memory: the new a is written, then read back to compute the new b",
        "(a, b) -> (a cos θ - b sin θ, a sin θ + b cos θ), both from the old a and b")
ANG = "t05_rope.Rotary.angles"
mistake("rope-frequencies-pairs-not-doubled", ANG, "-np.arange(0, self.rotated, 2) / self.rotated",
        "-np.arange(self.rotated // 2) / self.rotated",
        "w_c = base^(-2c / D_rot): the exponent counts 2c, so the frequencies fall twice as fast",
        "θ = p base^(-2c / D_rot)")
mistake("rope-frequencies-over-head-width", ANG, "-np.arange(0, self.rotated, 2) / self.rotated",
        "-np.arange(0, self.rotated, 2) / self.head_dim",
        "with partial rotary the frequencies spread over the rotated width D_rot, not the whole head D",
        "θ = p base^(-2c / D_rot)")
mistake("flash-dq-overwritten", FLASH, "d_q += d_scores @ k_heads[:, :, keys]", "d_q = d_scores @ k_heads[:, :, keys]",
        "every block of keys adds to d_q: accumulate over the blocks", FLASH_RECHECK)
mistake("flash-groups-by-stride", FLASH, "return d_q, sum_groups(d_k_heads, group), sum_groups(d_v_heads, group)",
        "return d_q, d_k_heads.reshape(d_k_heads.shape[0], group, -1, *d_k_heads.shape[2:]).sum(axis=1), "
        "d_v_heads.reshape(d_v_heads.shape[0], group, -1, *d_v_heads.shape[2:]).sum(axis=1)",
        "the groups are consecutive query heads (head h reads key/value head h // group)", FLASH_RECHECK)
mistake("flash-unreadable-rows-nan", FLASH, "lse = np.where(np.isfinite(lse), lse, np.inf)", "lse = lse",
        "a row with no readable key has lse = -inf, and exp(-inf + inf) is NaN: such rows must get p = 0",
        FLASH_RECHECK)
mistake("flash-softmax-per-block", FLASH, "d_scores = p * (d_p - delta) * cache.scale",
        "d_scores = p * (d_p - np.sum(p * d_p, axis=-1, keepdims=True)) * cache.scale",
        "the softmax runs over the whole row, not each block: the correction is delta over all keys",
        FLASH_RECHECK)
mistake("flash-forward-not-rescaled", "t18_flash_attention.flash_attention_forward",
        "acc = acc * rescale + p @ v_heads[:, :, start:stop]", "acc = acc + p @ v_heads[:, :, start:stop]",
        "when the running maximum grows, the sum so far is rescaled by exp(m - m_new), like the total",
        "acc = acc exp(m - m_new) + sum_j exp(s_j - m_new) v_j")
mistake("attention-both-scales-missing", ATT, (D_Q, D_K), ("d_q = d_scores @ k", "d_k = d_scores.swapaxes(-1, -2) @ q"),
        "scores = q k^T * scale: d_q and d_k both carry the factor scale (1/sqrt(D))", ATT_RECHECK)
mistake("attention-scale-divided", ATT, (D_Q, D_K),
        ("d_q = d_scores @ k / scale", "d_k = d_scores.swapaxes(-1, -2) @ q / scale"),
        "scale is already 1/sqrt(D) and the forward multiplied by it: so does the backward", ATT_RECHECK)
mistake("attention-forward-causal-ignored", FWD,
        "mask = combine_masks(check_mask(mask, (B, H, N, M)), causal, check_window(window), N, M)",
        "mask = check_mask(mask, (B, H, N, M))",
        "causal=True (and window) must add the causal rule to the mask: a query reads no later key",
        "weights = softmax(scores) where may_read")
mistake("mha-heads-concatenated-on-features", MHA, "np.concatenate([d_q, d_k, d_v], axis=1)",
        "np.concatenate([d_q, d_k, d_v], axis=-1)",
        "the fused features were cut into heads along the heads axis ([Q | K | V] heads): join the "
        "gradients on that axis (1), not on the features", MHA_RECHECK)
mistake("rope-backward-in-place", ROT, ROT_CALL,
        "d_x = d_out.copy()\n    d_a, d_b = pairs(d_x, self.layout, self.rotated)\n"
        "    d_a[...] = d_a * cache.cos + d_b * cache.sin\n    d_b[...] = -d_a * cache.sin + d_b * cache.cos\n"
        "    return d_x",
        "d_a is overwritten before d_b is computed from it: both new halves come from the old ones",
        ROT_RECHECK)
mistake("rope-rotate-turns-backwards", "t05_rope.rotate",
        ("out_a[...] = a * cos - b * sin", "out_b[...] = a * sin + b * cos"),
        ("out_a[...] = a * cos + b * sin", "out_b[...] = -a * sin + b * cos"),
        "each pair is turned by -θ: the rotation is (a cos θ - b sin θ, a sin θ + b cos θ)",
        "(a, b) -> (a cos θ - b sin θ, a sin θ + b cos θ)")
mistake("rope-rotate-zeros-passthrough", "t05_rope.rotate", "out = x.copy()", "out = np.zeros_like(x)",
        "features past D_rot are not rotated but pass through unchanged: start from a copy of x",
        "(a, b) -> (a cos θ - b sin θ, a sin θ + b cos θ); the rest as it is")
mistake("gqa-values-not-summed", GQA, GQA_RETURN, "return d_q, sum_groups(d_k_heads, group), d_v_heads",
        "the values were repeated too: d_v is summed over each group like d_k", GQA_RECHECK)
mistake("gqa-forward-caches-copies", "t04_attention.grouped_attention_forward",
        "return out, replace(cache, k=k, v=v)", "return out, cache",
        "the cache keeps the H_kv shared heads, not their repeated copies: the backward repeats them again",
        "query head h reads key/value head h // (H / H_kv)")
KV = "t13_kv_cache.LayerKV.write"
mistake("kv-cache-writes-at-start", KV, ("self.k[:, :, start:start + n] = k_new", "self.v[:, :, start:start + n] = v_new"),
        ("self.k[:, :, :n] = k_new", "self.v[:, :, :n] = v_new"),
        "new positions go after the cached ones, at length .. length + n", "keys 0 .. length + n")
mistake("kv-cache-returns-capacity", KV, "return self.k[:, :, :start + n], self.v[:, :, :start + n]",
        "return self.k, self.v", "return only the positions written so far (:length + n): the rest of the "
        "preallocated cache is empty", "keys 0 .. length + n")
mistake("kv-cache-window-from-the-end", "t13_kv_cache.LayerKV.extend",
        "first = first_readable_key(k_new.shape[2], k.shape[2], window)", "first = max(k.shape[2] - window, 0)",
        "with several new queries, the earliest of them reaches further back: keep every key any of them "
        "may read (first_readable_key)", "query - W < key <= query, for each new query")
FLASH_FWD = "t18_flash_attention.flash_attention_forward"
FLASH_FWD_RECHECK = ("m_new = max(m, max s);  l = l exp(m - m_new) + sum exp(s - m_new);  "
                     "acc likewise;  out = acc / l;  lse = m + log l")
mistake("flash-forward-max-not-kept", FLASH_FWD, "running_max = new_max", "new_max = new_max",
        "keep the running maximum (m = m_new after each block), or every block rescales from the first",
        FLASH_FWD_RECHECK)
mistake("flash-forward-lse-without-max", FLASH_FWD, "running_max + np.log(np.where(readable, total, 1))",
        "np.log(np.where(readable, total, 1))",
        "the total was summed with exponents shifted by the running maximum: lse = m + log l", FLASH_FWD_RECHECK)
mistake("flash-forward-empty-rows-nan", FLASH_FWD, "out = acc / np.where(readable, total, 1)", "out = acc / total",
        "a row with no readable key has total 0: give it a zero output instead of 0/0", FLASH_FWD_RECHECK)
mistake("flash-forward-rescale-unguarded", FLASH_FWD, "rescale = np.exp(running_max - safe_max)",
        "rescale = np.exp(running_max - new_max)",
        "until a row has seen a readable key both maxima are -inf, and -inf - (-inf) is NaN: rescale "
        "with the guarded maximum", FLASH_FWD_RECHECK)
mistake("attention-dv-not-transposed", ATT, "d_v = weights.swapaxes(-1, -2) @ d_out", "d_v = weights @ d_out",
        "d_v = weights^T d_out: each key collects the gradient of the queries that read it", ATT_RECHECK)
mistake("attention-softmax-elementwise", ATT, "d_scores = softmax_backward(d_weights, cache.softmax)",
        "d_scores = d_weights * weights",
        "the softmax is not elementwise: its backward subtracts each row's sum, "
        "weights * (d_weights - sum_j d_weights_j weights_j)", ATT_RECHECK)
mistake("attention-dk-not-transposed", ATT, D_K, "d_k = d_scores @ q * scale",
        "d_k = d_scores^T q: the keys index the columns of the score table", ATT_RECHECK)
mistake("attention-transposes-on-the-wrong-side", ATT, (D_Q, D_K),
        ("d_q = d_scores.swapaxes(-1, -2) @ k * scale", "d_k = d_scores @ q * scale"),
        "the transpose belongs to d_k: d_q = d_scores k, d_k = d_scores^T q", ATT_RECHECK)
mistake("attention-forward-scale-ignored", FWD, "scale = 1.0 / math.sqrt(D) if scale is None else float(scale)",
        "scale = 1.0 / math.sqrt(D)", "a scale that is passed in replaces 1/sqrt(D)", "scores = q k^T * scale")
mistake("mha-rotation-never-undone", MHA, "if self.rope is not None:", "if False:",
        "q and k were rotated by RoPE: both gradients must be rotated back before the projections",
        MHA_RECHECK)
mistake("mha-plain-attention-backward", MHA, "self.kernel.backward(d_mixed, cache.attn)",
        "attention_backward(d_mixed, cache.attn)",
        "go back through the kernel that ran forward: with grouped-query heads its backward sums each "
        "group's gradients into the shared key/value head", MHA_RECHECK)
mistake("mha-wo-by-hand", MHA, "d_merged = self.out.backward(d_out, cache.out)",
        "d_merged = d_out @ self.out.weight.data.T",
        "through Wo by hand, Wo's own gradients (weight and bias) are never accumulated: call out.backward",
        MHA_RECHECK)
SPLIT = "t04_attention.MultiHeadAttention.split_heads"
mistake("split-heads-kv-as-many-as-q", SPLIT, "heads[:, :H], heads[:, H:H + H_kv], heads[:, H + H_kv:]",
        "heads[:, :H], heads[:, H:2 * H], heads[:, 2 * H:]",
        "with grouped-query attention K and V have H_kv heads each, not H", "[q heads H | k heads H_kv | v heads H_kv]")
mistake("split-heads-interleaved", SPLIT, "heads = qkv.reshape(B, N, H + 2 * H_kv, D)",
        "heads = qkv.reshape(B, N, D, H + 2 * H_kv).swapaxes(-1, -2)",
        "each head is a contiguous block of D features: reshape to [B, N, heads, D]",
        "[B, N, (H + 2 H_kv) D] -> [B, N, heads, D]")
mistake("rope-backward-whole-width", ROT, ROT_CALL, "return rotate(d_out, cache.cos, -cache.sin, self.layout)",
        "only the rotated width was turned: the gradient turns back over the same D_rot features", ROT_RECHECK)
mistake("gqa-backward-tiled-heads", GQA, "k=repeat_kv(cache.k, group), v=repeat_kv(cache.v, group)",
        "k=np.tile(cache.k, (1, group, 1, 1)), v=np.tile(cache.v, (1, group, 1, 1))",
        "np.tile orders the heads [0, 1, 0, 1], the forward's repeat [0, 0, 1, 1]: query head h reads "
        "key/value head h // group", GQA_RECHECK)
mistake("kv-cache-keys-stored-as-values", KV, "self.v[:, :, start:start + n] = v_new",
        "self.v[:, :, start:start + n] = k_new", "the value cache stores the values", "k[start:] = k_new;  v[start:] = v_new")
mistake("kv-window-mask-not-trimmed", "t13_kv_cache.LayerKV.extend",
        "None if mask is None else mask[..., first:]", "mask",
        "the keys were cut to the window: cut the mask the same way so it lines up with them",
        "keep keys, values and mask from the first readable position on")
mistake("flash-dk-scaled-twice", FLASH, "d_k_heads[:, :, keys] += d_scores.swapaxes(-1, -2) @ q",
        "d_k_heads[:, :, keys] += d_scores.swapaxes(-1, -2) @ q * cache.scale",
        "d_scores already holds the scale: applying it again scales d_k twice", FLASH_RECHECK)
mistake("flash-weights-not-normalised", FLASH, "np.exp(block_scores(cache, keys.start, keys.stop) - lse)",
        "np.exp(block_scores(cache, keys.start, keys.stop))",
        "the recomputed weights subtract the stored log-sum-exp before exponentiating", FLASH_RECHECK)
mistake("flash-total-not-rescaled", FLASH_FWD, "total = total * rescale + p.sum(axis=-1, keepdims=True)",
        "total = total + p.sum(axis=-1, keepdims=True)",
        "when a block raises the running maximum, the running sum is rescaled by exp(m - m_new) too",
        FLASH_FWD_RECHECK)

# -- written as a learner writes them ------------------------------------------------------------
mistake("attention-dk-own-scale", ATT, D_K, "d_k = d_scores.swapaxes(-1, -2) @ q / math.sqrt(q.shape[-1])",
        "d_k uses the scale the forward used (cache.scale), which need not be 1/sqrt(D)", ATT_RECHECK)
mistake("attention-dq-own-scale", ATT, D_Q, "d_q = d_scores @ k / math.sqrt(k.shape[-1])",
        "d_q uses the scale the forward used (cache.scale), which need not be 1/sqrt(D)", ATT_RECHECK)
mistake("attention-scale-twice", ATT, "d_scores = softmax_backward(d_weights, cache.softmax)",
        "d_scores = softmax_backward(d_weights, cache.softmax) * scale",
        "the scale is applied once: either to d_scores or in d_q and d_k, not both", ATT_RECHECK)
mistake("attention-dk-reads-keys", ATT, D_K, "d_k = d_scores.swapaxes(-1, -2) @ k * scale",
        "scores = q k^T: d_k is d_scores^T times q, the other factor, not k itself", ATT_RECHECK)
mistake("attention-forward-mask-multiplied", FWD, "weights, softmax = softmax_forward(scores, mask=mask)",
        "weights, softmax = softmax_forward(scores if mask is None else scores * mask)",
        "a masked score set to 0 still gets weight e^0: masked scores must become -inf (give the mask "
        "to the softmax)", "weights = softmax(scores) with masked scores at -inf")
mistake("mha-backward-heads-interleaved", MHA,
        "d_merged.reshape(B, N, self.n_heads, self.head_dim).transpose(0, 2, 1, 3)",
        "d_merged.reshape(B, N, self.head_dim, self.n_heads).transpose(0, 3, 1, 2)",
        "merge_heads put the heads side by side, [H, D] per position: split the gradient the same way",
        MHA_RECHECK)
mistake("mha-rope-forward-on-gradients", MHA,
        ("d_q = self.rope.backward(d_q, cache.q_rope)", "d_k = self.rope.backward(d_k, cache.k_rope)"),
        ("d_q = self.rope.forward(d_q, np.arange(N))[0]", "d_k = self.rope.forward(d_k, np.arange(N))[0]"),
        "the gradient of a rotation by theta is the rotation by -theta (rope.backward), not another turn "
        "by +theta", MHA_RECHECK)
mistake("mha-merge-heads-last", "t04_attention.MultiHeadAttention.merge_heads",
        "mixed.transpose(0, 2, 1, 3)", "mixed.transpose(0, 2, 3, 1)",
        "the heads go side by side ([B, N, H, D] then flatten): moving the head axis last interleaves them",
        "merged[b, n] = concat over h of mixed[b, h, n]")
mistake("rope-backward-default-layout-and-width", ROT, ROT_CALL, "return rotate(d_out, cache.cos, -cache.sin)",
        "rotate must be told the layout and the rotated width the forward used", ROT_RECHECK)
mistake("rope-angles-outer", ANG, "np.asarray(positions, dtype=np.float64)[..., None] * w", "np.outer(positions, w)",
        "np.outer flattens positions given per sequence [B, N]: each position times each frequency keeps "
        "its batch axis ([..., None] * w)", "theta[..., p, c] = p w_c")
mistake("rope-rotate-halves-only", "t05_rope.rotate", "a, b = pairs(x, layout, rotated)",
        "a, b = x[..., : rotated // 2], x[..., rotated // 2: rotated]",
        "the pairs follow the layout: (2c, 2c + 1) when interleaved, (c, c + D_rot/2) for halves",
        "out = (a cos - b sin, a sin + b cos) over the layout's pairs")
mistake("gqa-sum-groups-by-kv-heads", GQA, GQA_RETURN,
        "return d_q, sum_groups(d_k_heads, cache.k.shape[1]), sum_groups(d_v_heads, cache.k.shape[1])",
        "sum_groups takes the group size H / H_kv, the query heads per shared head, not H_kv", GQA_RECHECK)
mistake("kv-cache-writes-one-late", KV, ("self.k[:, :, start:start + n] = k_new", "self.v[:, :, start:start + n] = v_new"),
        ("self.k[:, :, start + 1:start + n + 1] = k_new", "self.v[:, :, start + 1:start + n + 1] = v_new"),
        "the first free slot is start = the length so far (slots count from 0)",
        "k[:, :, length:length + n] = k_new")
mistake("flash-group-gradients-per-query-head", FLASH,
        "return d_q, sum_groups(d_k_heads, group), sum_groups(d_v_heads, group)", "return d_q, d_k_heads, d_v_heads",
        "a key/value head shared by a group returns one gradient: the sum over its group (sum_groups)",
        FLASH_RECHECK)
mistake("flash-softmax-within-block", FLASH, "p = np.exp(block_scores(cache, keys.start, keys.stop) - lse)",
        "s = block_scores(cache, keys.start, keys.stop)\n"
        "        p = np.exp(s - s.max(axis=-1, keepdims=True))\n        p = p / p.sum(axis=-1, keepdims=True)",
        "the weights are exp(s - lse), normalised over the whole row: a softmax over one block of keys "
        "is another distribution", FLASH_RECHECK)
mistake("attention-forward-mask-inverted", FWD, "softmax_forward(scores, mask=mask)",
        "softmax_forward(scores, mask=None if mask is None else ~mask)",
        "npformer's mask says where a query MAY read (True = keep): it is not a list of the masked places",
        "weights = softmax(scores) with the forbidden scores at -inf")
mistake("may-read-future", READ, "allowed = key_pos <= query_pos", "allowed = key_pos >= query_pos",
        "causal: a query reads the keys at or BEFORE its position", "may read: key_pos <= query_pos")
mistake("may-read-window-one-fewer", READ, "key_pos > query_pos - window", "key_pos > query_pos - window + 1",
        "a window of W keeps W keys, the query's own included: key > query - W", "may read: query - W < key_pos <= query_pos")
mistake("kv-cache-returns-before-write", KV, "return self.k[:, :, :start + n], self.v[:, :, :start + n]",
        "return self.k[:, :, :start], self.v[:, :, :start]",
        "return the keys up to the new ones included (:length + n)", "keys 0 .. length + n")
mistake("kv-cache-grows-new-arrays", KV,
        ("self.k[:, :, start:start + n] = k_new", "self.v[:, :, start:start + n] = v_new",
         "return self.k[:, :, :start + n], self.v[:, :, :start + n]"),
        ("self.k = np.concatenate([self.k[:, :, :start], k_new], axis=2)",
         "self.v = np.concatenate([self.v[:, :, :start], v_new], axis=2)", "return self.k, self.v"),
        "the cache is preallocated: write the new positions into it in place (self.k[:, :, start:start + n] = ...); "
        "a new array each step leaves the cache's own storage unwritten", "k[:, :, length:length + n] = k_new")
mistake("attention-softmax-sum-term-without-weights", ATT, "d_scores = softmax_backward(d_weights, cache.softmax)",
        "d_scores = weights * d_weights - np.sum(d_weights * weights, axis=-1, keepdims=True)",
        "written out, the softmax backward multiplies the row-sum term by the weights too: "
        "w_i (d_w_i - sum_j d_w_j w_j)", ATT_RECHECK)
mistake("attention-returns-dv-as-dk", ATT, "return d_q, d_k, d_v", "return d_q, d_v, d_k",
        "the gradients come back in the order of the inputs: (d_q, d_k, d_v)", ATT_RECHECK)
mistake("attention-forward-scale-by-keys", FWD, "scale = 1.0 / math.sqrt(D) if scale is None",
        "scale = 1.0 / math.sqrt(M) if scale is None",
        "the scale is 1/sqrt(D), the width of a query and key vector, not the number of keys",
        "scores = q k^T / sqrt(D)")
mistake("mha-returns-projection-gradient", MHA, "return self.qkv.backward(d_qkv, cache.qkv)",
        "self.qkv.backward(d_qkv, cache.qkv)\n    return d_qkv",
        "d_qkv is the gradient of the projection's output; d_x is what its backward returns", MHA_RECHECK)
mistake("split-heads-qkv-per-head", SPLIT, "heads[:, :H], heads[:, H:H + H_kv], heads[:, H + H_kv:]",
        "heads[:, 0::3], heads[:, 1::3], heads[:, 2::3]",
        "the fused projection is [all q heads | all k heads | all v heads], not (q, k, v) per head",
        "[q heads H | k heads H_kv | v heads H_kv]")
mistake("rope-backward-second-row-sign", ROT, ROT_CALL,
        "d_x = d_out.copy()\n    d_a, d_b = pairs(d_out, self.layout, self.rotated)\n"
        "    out_a, out_b = pairs(d_x, self.layout, self.rotated)\n"
        "    out_a[...] = d_a * cache.cos + d_b * cache.sin\n"
        "    out_b[...] = d_a * cache.sin + d_b * cache.cos\n    return d_x",
        "the transpose of [[cos, -sin], [sin, cos]] is [[cos, sin], [-sin, cos]]: the second row's sin "
        "changes sign too", ROT_RECHECK)
mistake("gqa-group-sum-over-kv-axis", GQA, GQA_RETURN,
        "B, H, M, _ = d_k_heads.shape\n"
        "    d_k = d_k_heads.reshape(B, H // group, group, M, -1).sum(axis=1)\n"
        "    d_v = d_v_heads.reshape(B, H // group, group, M, -1).sum(axis=1)\n    return d_q, d_k, d_v",
        "in [B, H_kv, group, M, F] a group's copies lie on axis 2: sum that one, not the key/value heads' axis",
        GQA_RECHECK)
mistake("gqa-forward-arguments-shifted", "t04_attention.grouped_attention_forward", "mask, scale,\n", "mask,\n",
        "attention_forward takes (q, k, v, mask, scale, causal, window): leaving scale out shifts causal "
        "and window one place", "out = attention(q, repeat_kv(k), repeat_kv(v)) with the same options")
mistake("flash-scale-twice", FLASH, ("d_q += d_scores @ k_heads[:, :, keys]", "+= d_scores.swapaxes(-1, -2) @ q"),
        ("d_q += d_scores @ k_heads[:, :, keys] * cache.scale", "+= d_scores.swapaxes(-1, -2) @ q * cache.scale"),
        "d_scores already carries the scale: d_q and d_k take it once", FLASH_RECHECK)
mistake("flash-scores-recomputed-unmasked", FLASH, "p = np.exp(block_scores(cache, keys.start, keys.stop) - lse)",
        "p = np.exp(q @ k_heads[:, :, keys].swapaxes(-1, -2) * cache.scale - lse)",
        "recomputed scores need the forward's mask and causal rule (block_scores applies them)", FLASH_RECHECK)
