"""Mistakes in attention (t04_attention.py): the kernel, the causal rule, multi-head attention
and its heads, grouped-query attention."""
from .registry import mistake

ATT = "t04_attention.attention_backward"
ATT_RECHECK = ("d_weights = d_out v^T;  d_v = weights^T d_out;  d_scores = softmax backward;  "
               "d_q = d_scores k / sqrt(D);  d_k = d_scores^T q / sqrt(D)")
D_Q = "d_q = d_scores @ k * scale"
D_K = "d_k = d_scores.swapaxes(-1, -2) @ q * scale"
FWD = "t04_attention.attention_forward"
READ = "t04_attention.may_read"
MHA = "t04_attention.MultiHeadAttention.backward"
MHA_RECHECK = "undo in reverse: Wo, merge heads, attention, RoPE on q and k, split heads, [Wq | Wk | Wv]"
GQA = "t04_attention.grouped_attention_backward"
GQA_RECHECK = "a shared head's gradient is the sum over its group: sum_groups(d_k_heads, group)"
GQA_RETURN = "return d_q, sum_groups(d_k_heads, group), sum_groups(d_v_heads, group)"
SPLIT = "t04_attention.MultiHeadAttention.split_heads"
READ_RECHECK = "may read: key_pos <= query_pos"
FWD_RECHECK = "weights = softmax(scores) where may_read"

# -- attention_backward -----------------------------------------------------------------------------
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
mistake("attention-both-scales-missing", ATT, (D_Q, D_K), ("d_q = d_scores @ k", "d_k = d_scores.swapaxes(-1, -2) @ q"),
        "scores = q k^T * scale: d_q and d_k both carry the factor scale (1/sqrt(D))", ATT_RECHECK)
mistake("attention-scale-divided", ATT, (D_Q, D_K),
        ("d_q = d_scores @ k / scale", "d_k = d_scores.swapaxes(-1, -2) @ q / scale"),
        "scale is already 1/sqrt(D) and the forward multiplied by it: so does the backward", ATT_RECHECK)
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
mistake("attention-dk-own-scale", ATT, D_K, "d_k = d_scores.swapaxes(-1, -2) @ q / math.sqrt(q.shape[-1])",
        "d_k uses the scale the forward used (cache.scale), which need not be 1/sqrt(D)", ATT_RECHECK)
mistake("attention-dq-own-scale", ATT, D_Q, "d_q = d_scores @ k / math.sqrt(k.shape[-1])",
        "d_q uses the scale the forward used (cache.scale), which need not be 1/sqrt(D)", ATT_RECHECK)
mistake("attention-scale-twice", ATT, "d_scores = softmax_backward(d_weights, cache.softmax)",
        "d_scores = softmax_backward(d_weights, cache.softmax) * scale",
        "the scale is applied once: either to d_scores or in d_q and d_k, not both", ATT_RECHECK)
mistake("attention-dk-reads-keys", ATT, D_K, "d_k = d_scores.swapaxes(-1, -2) @ k * scale",
        "scores = q k^T: d_k is d_scores^T times q, the other factor, not k itself", ATT_RECHECK)
mistake("attention-softmax-sum-term-without-weights", ATT, "d_scores = softmax_backward(d_weights, cache.softmax)",
        "d_scores = weights * d_weights - np.sum(d_weights * weights, axis=-1, keepdims=True)",
        "written out, the softmax backward multiplies the row-sum term by the weights too: "
        "w_i (d_w_i - sum_j d_w_j w_j)", ATT_RECHECK)
mistake("attention-returns-dv-as-dk", ATT, "return d_q, d_k, d_v", "return d_q, d_v, d_k",
        "the gradients come back in the order of the inputs: (d_q, d_k, d_v)", ATT_RECHECK)

# -- may_read ---------------------------------------------------------------------------------------
mistake("may-read-not-itself", READ, "allowed = key_pos <= query_pos", "allowed = key_pos < query_pos",
        "a position also reads itself: key <= query", READ_RECHECK)
mistake("may-read-window-one-more", READ, "key_pos > query_pos - window", "key_pos >= query_pos - window",
        "a window of W keeps the W most recent keys, the query's own included: key > query - W",
        "may read: query - W < key_pos <= query_pos")
mistake("may-read-future", READ, "allowed = key_pos <= query_pos", "allowed = key_pos >= query_pos",
        "causal: a query reads the keys at or BEFORE its position", READ_RECHECK)
mistake("may-read-window-one-fewer", READ, "key_pos > query_pos - window", "key_pos > query_pos - window + 1",
        "a window of W keeps W keys, the query's own included: key > query - W", "may read: query - W < key_pos <= query_pos")

# -- attention_forward ------------------------------------------------------------------------------
mistake("attention-forward-mask-ignored", FWD, "softmax_forward(scores, mask=mask)", "softmax_forward(scores)",
        "the mask is never applied: keys a query may not read still get weight",
        FWD_RECHECK)
mistake("attention-forward-no-scale", FWD, "scores = q @ k.swapaxes(-1, -2) * scale",
        "scores = q @ k.swapaxes(-1, -2)", "the scores are divided by sqrt(D)", "scores = q k^T / sqrt(D)")
mistake("attention-forward-scale-by-D", FWD, "scale = 1.0 / math.sqrt(D) if scale is None",
        "scale = 1.0 / D if scale is None", "the scale is 1/sqrt(D), not 1/D", "scores = q k^T / sqrt(D)")
mistake("attention-forward-mask-after-softmax", FWD, "weights, softmax = softmax_forward(scores, mask=mask)",
        "weights, softmax = softmax_forward(scores)\n    weights = weights if mask is None else weights * mask",
        "the mask acts on the scores before the softmax; zeroing weights after it leaves rows that do "
        "not sum to 1", FWD_RECHECK)
mistake("attention-forward-causal-ignored", FWD,
        "mask = combine_masks(check_mask(mask, (B, H, N, M)), causal, check_window(window), N, M)",
        "mask = check_mask(mask, (B, H, N, M))",
        "causal=True (and window) must add the causal rule to the mask: a query reads no later key",
        FWD_RECHECK)
mistake("attention-forward-scale-ignored", FWD, "scale = 1.0 / math.sqrt(D) if scale is None else float(scale)",
        "scale = 1.0 / math.sqrt(D)", "a scale that is passed in replaces 1/sqrt(D)", "scores = q k^T * scale")
mistake("attention-forward-mask-multiplied", FWD, "weights, softmax = softmax_forward(scores, mask=mask)",
        "weights, softmax = softmax_forward(scores if mask is None else scores * mask)",
        "a masked score set to 0 still gets weight e^0: masked scores must become -inf (give the mask "
        "to the softmax)", "weights = softmax(scores) with masked scores at -inf")
mistake("attention-forward-mask-inverted", FWD, "softmax_forward(scores, mask=mask)",
        "softmax_forward(scores, mask=None if mask is None else ~mask)",
        "npformer's mask says where a query MAY read (True = keep): it is not a list of the masked places",
        "weights = softmax(scores) with the forbidden scores at -inf")
mistake("attention-forward-scale-by-keys", FWD, "scale = 1.0 / math.sqrt(D) if scale is None",
        "scale = 1.0 / math.sqrt(M) if scale is None",
        "the scale is 1/sqrt(D), the width of a query and key vector, not the number of keys",
        "scores = q k^T / sqrt(D)")

# -- MultiHeadAttention.backward --------------------------------------------------------------------
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
mistake("mha-qkv-backward-by-hand", MHA, "return self.qkv.backward(d_qkv, cache.qkv)",
        "return d_qkv @ self.qkv.weight.data.T",
        "d_x is computed by hand, so the fused Q/K/V projection never adds its weight gradient: call its "
        "backward", MHA_RECHECK)
mistake("mha-heads-concatenated-on-features", MHA, "np.concatenate([d_q, d_k, d_v], axis=1)",
        "np.concatenate([d_q, d_k, d_v], axis=-1)",
        "the fused features were cut into heads along the heads axis ([Q | K | V] heads): join the "
        "gradients on that axis (1), not on the features", MHA_RECHECK)
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
mistake("mha-returns-projection-gradient", MHA, "return self.qkv.backward(d_qkv, cache.qkv)",
        "self.qkv.backward(d_qkv, cache.qkv)\n    return d_qkv",
        "d_qkv is the gradient of the projection's output; d_x is what its backward returns", MHA_RECHECK)

# -- MultiHeadAttention.split_heads -----------------------------------------------------------------
mistake("mha-split-without-transpose", "t04_attention.MultiHeadAttention.split_heads",
        ("heads = qkv.reshape(B, N, H + 2 * H_kv, D)", "heads = heads.transpose(0, 2, 1, 3)"),
        ("heads = qkv.reshape(B, H + 2 * H_kv, N, D)", "heads = heads"),
        "reshaping [B, N, features] straight to [B, heads, N, D] mixes positions into heads: reshape to "
        "[B, N, heads, D], then swap N and heads", "[B, N, (H + 2 H_kv) D] -> [B, N, heads, D] -> [B, heads, N, D]")
mistake("split-heads-kv-as-many-as-q", SPLIT, "heads[:, :H], heads[:, H:H + H_kv], heads[:, H + H_kv:]",
        "heads[:, :H], heads[:, H:2 * H], heads[:, 2 * H:]",
        "with grouped-query attention K and V have H_kv heads each, not H", "[q heads H | k heads H_kv | v heads H_kv]")
mistake("split-heads-interleaved", SPLIT, "heads = qkv.reshape(B, N, H + 2 * H_kv, D)",
        "heads = qkv.reshape(B, N, D, H + 2 * H_kv).swapaxes(-1, -2)",
        "each head is a contiguous block of D features: reshape to [B, N, heads, D]",
        "[B, N, (H + 2 H_kv) D] -> [B, N, heads, D]")
mistake("split-heads-qkv-per-head", SPLIT, "heads[:, :H], heads[:, H:H + H_kv], heads[:, H + H_kv:]",
        "heads[:, 0::3], heads[:, 1::3], heads[:, 2::3]",
        "the fused projection is [all q heads | all k heads | all v heads], not (q, k, v) per head",
        "[q heads H | k heads H_kv | v heads H_kv]")

# -- MultiHeadAttention.merge_heads -----------------------------------------------------------------
mistake("mha-merge-without-transpose", "t04_attention.MultiHeadAttention.merge_heads",
        "mixed.transpose(0, 2, 1, 3).reshape(B, N, H * D)", "mixed.reshape(B, N, H * D)",
        "merging needs [B, N, H, D] first: swap H and N before the reshape", "[B, H, N, D] -> [B, N, H*D]")
mistake("mha-merge-heads-last", "t04_attention.MultiHeadAttention.merge_heads",
        "mixed.transpose(0, 2, 1, 3)", "mixed.transpose(0, 2, 3, 1)",
        "the heads go side by side ([B, N, H, D] then flatten): moving the head axis last interleaves them",
        "merged[b, n] = concat over h of mixed[b, h, n]")

# -- grouped_attention_backward ---------------------------------------------------------------------
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
mistake("gqa-values-not-summed", GQA, GQA_RETURN, "return d_q, sum_groups(d_k_heads, group), d_v_heads",
        "the values were repeated too: d_v is summed over each group like d_k", GQA_RECHECK)
mistake("gqa-backward-tiled-heads", GQA, "k=repeat_kv(cache.k, group), v=repeat_kv(cache.v, group)",
        "k=np.tile(cache.k, (1, group, 1, 1)), v=np.tile(cache.v, (1, group, 1, 1))",
        "np.tile orders the heads [0, 1, 0, 1], the forward's repeat [0, 0, 1, 1]: query head h reads "
        "key/value head h // group", GQA_RECHECK)
mistake("gqa-sum-groups-by-kv-heads", GQA, GQA_RETURN,
        "return d_q, sum_groups(d_k_heads, cache.k.shape[1]), sum_groups(d_v_heads, cache.k.shape[1])",
        "sum_groups takes the group size H / H_kv, the query heads per shared head, not H_kv", GQA_RECHECK)
mistake("gqa-group-sum-over-kv-axis", GQA, GQA_RETURN,
        "B, H, M, _ = d_k_heads.shape\n"
        "    d_k = d_k_heads.reshape(B, H // group, group, M, -1).sum(axis=1)\n"
        "    d_v = d_v_heads.reshape(B, H // group, group, M, -1).sum(axis=1)\n    return d_q, d_k, d_v",
        "in [B, H_kv, group, M, F] a group's copies lie on axis 2: sum that one, not the key/value heads' axis",
        GQA_RECHECK)

# -- grouped_attention_forward ----------------------------------------------------------------------
mistake("gqa-forward-tiled", "t04_attention.grouped_attention_forward",
        "attention_forward(q, repeat_kv(k, group), repeat_kv(v, group)",
        "attention_forward(q, np.tile(k, (1, group, 1, 1)), np.tile(v, (1, group, 1, 1))",
        "np.tile interleaves the groups (head h reads k[h % H_kv]); each head is repeated group times "
        "in a row (h // group)", "query head h reads key/value head h // (H / H_kv)")
mistake("gqa-forward-caches-copies", "t04_attention.grouped_attention_forward",
        "return out, replace(cache, k=k, v=v)", "return out, cache",
        "the cache keeps the H_kv shared heads, not their repeated copies: the backward repeats them again",
        "query head h reads key/value head h // (H / H_kv)")
mistake("gqa-forward-arguments-shifted", "t04_attention.grouped_attention_forward", "mask, scale,\n", "mask,\n",
        "attention_forward takes (q, k, v, mask, scale, causal, window): leaving scale out shifts causal "
        "and window one place", "out = attention(q, repeat_kv(k), repeat_kv(v)) with the same options")
