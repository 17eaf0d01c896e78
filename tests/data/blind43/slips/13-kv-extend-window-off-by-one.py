# exercise: kv-cache
# function: t13_kv_cache.py:LayerKV.extend
# slip: the window cuts one key too many: the oldest key a query may read is dropped
def extend(self, k_new, v_new, mask=None, window=None):
    """``write`` the n new positions, then (k, v, mask) of every cached position the n new
    queries may read: with a sliding ``window``, the keys before its reach are left out
    (no query reads them) and the mask [..., M] is cut to match."""
    k, v = self.write(k_new, v_new)
    if window is None:
        return k, v, mask
    first = first_readable_key(k_new.shape[2], k.shape[2], window)
    return k[:, :, first + 1:], v[:, :, first + 1:], None if mask is None else mask[..., first + 1:]
