"""Mistakes in flash attention (t18_flash_attention.py): the blockwise forward and backward."""
from .registry import mistake

FLASH = "t18_flash_attention.flash_attention_backward"
FLASH_RECHECK = "d_s = p (d_p - delta) scale, delta_i = sum_d d_out_id out_id"
FLASH_FWD = "t18_flash_attention.flash_attention_forward"
FLASH_FWD_RECHECK = ("m_new = max(m, max s);  l = l exp(m - m_new) + sum exp(s - m_new);  "
                     "acc likewise;  out = acc / l;  lse = m + log l")

# -- flash_attention_backward -----------------------------------------------------------------------
mistake("flash-no-delta", FLASH, "delta = np.sum(d_out * cache.out, axis=-1, keepdims=True)", "delta = 0",
        "the softmax correction delta = sum(d_out * out) over the head width is missing", FLASH_RECHECK)
mistake("flash-no-scale", FLASH, "d_scores = p * (d_p - delta) * cache.scale", "d_scores = p * (d_p - delta)",
        "the scores were scaled by 1/sqrt(D): d_scores carries the scale", FLASH_RECHECK)
mistake("flash-no-group-sum", FLASH, "return d_q, sum_groups(d_k_heads, group), sum_groups(d_v_heads, group)",
        "return d_q, d_k_heads[:, ::group], d_v_heads[:, ::group]",
        "a key/value head shared by a group receives the sum of the group's gradients", FLASH_RECHECK)
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
mistake("flash-dk-scaled-twice", FLASH, "d_k_heads[:, :, keys] += d_scores.swapaxes(-1, -2) @ q",
        "d_k_heads[:, :, keys] += d_scores.swapaxes(-1, -2) @ q * cache.scale",
        "d_scores already holds the scale: applying it again scales d_k twice", FLASH_RECHECK)
mistake("flash-weights-not-normalised", FLASH, "np.exp(block_scores(cache, keys.start, keys.stop) - lse)",
        "np.exp(block_scores(cache, keys.start, keys.stop))",
        "the recomputed weights subtract the stored log-sum-exp before exponentiating", FLASH_RECHECK)
mistake("flash-group-gradients-per-query-head", FLASH,
        "return d_q, sum_groups(d_k_heads, group), sum_groups(d_v_heads, group)", "return d_q, d_k_heads, d_v_heads",
        "a key/value head shared by a group returns one gradient: the sum over its group (sum_groups)",
        FLASH_RECHECK)
mistake("flash-softmax-within-block", FLASH, "p = np.exp(block_scores(cache, keys.start, keys.stop) - lse)",
        "s = block_scores(cache, keys.start, keys.stop)\n"
        "        p = np.exp(s - s.max(axis=-1, keepdims=True))\n        p = p / p.sum(axis=-1, keepdims=True)",
        "the weights are exp(s - lse), normalised over the whole row: a softmax over one block of keys "
        "is another distribution", FLASH_RECHECK)
mistake("flash-scale-twice", FLASH, ("d_q += d_scores @ k_heads[:, :, keys]", "+= d_scores.swapaxes(-1, -2) @ q"),
        ("d_q += d_scores @ k_heads[:, :, keys] * cache.scale", "+= d_scores.swapaxes(-1, -2) @ q * cache.scale"),
        "d_scores already carries the scale: d_q and d_k take it once", FLASH_RECHECK)
mistake("flash-scores-recomputed-unmasked", FLASH, "p = np.exp(block_scores(cache, keys.start, keys.stop) - lse)",
        "p = np.exp(q @ k_heads[:, :, keys].swapaxes(-1, -2) * cache.scale - lse)",
        "recomputed scores need the forward's mask and causal rule (block_scores applies them)", FLASH_RECHECK)

# -- flash_attention_forward ------------------------------------------------------------------------
mistake("flash-forward-not-rescaled", "t18_flash_attention.flash_attention_forward",
        "acc = acc * rescale + p @ v_heads[:, :, start:stop]", "acc = acc + p @ v_heads[:, :, start:stop]",
        "when the running maximum grows, the sum so far is rescaled by exp(m - m_new), like the total",
        "acc = acc exp(m - m_new) + sum_j exp(s_j - m_new) v_j")
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
mistake("flash-total-not-rescaled", FLASH_FWD, "total = total * rescale + p.sum(axis=-1, keepdims=True)",
        "total = total + p.sum(axis=-1, keepdims=True)",
        "when a block raises the running maximum, the running sum is rescaled by exp(m - m_new) too",
        FLASH_FWD_RECHECK)
