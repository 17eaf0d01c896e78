"""Mistakes in the KV cache (t13_kv_cache.py): writing new keys and values, the window."""
from .registry import mistake

KV = "t13_kv_cache.LayerKV.write"

# -- LayerKV.write ----------------------------------------------------------------------------------
mistake("kv-cache-returns-new-keys-only", "t13_kv_cache.LayerKV.write",
        "return self.k[:, :, :start + n], self.v[:, :, :start + n]",
        "return self.k[:, :, start:start + n], self.v[:, :, start:start + n]",
        "the new query must read every key so far, not only the new ones", "keys 0 .. length + n")
mistake("kv-cache-writes-at-start", KV, ("self.k[:, :, start:start + n] = k_new", "self.v[:, :, start:start + n] = v_new"),
        ("self.k[:, :, :n] = k_new", "self.v[:, :, :n] = v_new"),
        "new positions go after the cached ones, at length .. length + n", "keys 0 .. length + n")
mistake("kv-cache-returns-capacity", KV, "return self.k[:, :, :start + n], self.v[:, :, :start + n]",
        "return self.k, self.v", "return only the positions written so far (:length + n): the rest of the "
        "preallocated cache is empty", "keys 0 .. length + n")
mistake("kv-cache-keys-stored-as-values", KV, "self.v[:, :, start:start + n] = v_new",
        "self.v[:, :, start:start + n] = k_new", "the value cache stores the values", "k[start:] = k_new;  v[start:] = v_new")
mistake("kv-cache-writes-one-late", KV, ("self.k[:, :, start:start + n] = k_new", "self.v[:, :, start:start + n] = v_new"),
        ("self.k[:, :, start + 1:start + n + 1] = k_new", "self.v[:, :, start + 1:start + n + 1] = v_new"),
        "the first free slot is start = the length so far (slots count from 0)",
        "k[:, :, length:length + n] = k_new")
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

# -- LayerKV.extend ---------------------------------------------------------------------------------
mistake("kv-cache-window-from-the-end", "t13_kv_cache.LayerKV.extend",
        "first = first_readable_key(k_new.shape[2], k.shape[2], window)", "first = max(k.shape[2] - window, 0)",
        "with several new queries, the earliest of them reaches further back: keep every key any of them "
        "may read (first_readable_key)", "query - W < key <= query, for each new query")
mistake("kv-window-mask-not-trimmed", "t13_kv_cache.LayerKV.extend",
        "None if mask is None else mask[..., first:]", "mask",
        "the keys were cut to the window: cut the mask the same way so it lines up with them",
        "keep keys, values and mask from the first readable position on")
