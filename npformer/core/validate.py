"""Input checks for the public entry points, each rule written once.

Every check raises ``TypeError`` or ``ValueError`` with a message that names the
argument, what was expected and what was given, and returns the value (converted
to an array where that helps) so callers can write ``ids = check_ids("ids", ids, V)``.
"""
from __future__ import annotations

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_float_dtype(name, dtype):
    """float32 or float64 (what npformer computes in); anything else is a TypeError."""
    dtype = np.dtype(dtype)
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name}: expected float32 or float64 (npformer computes in these), got {dtype}")
    return dtype


def check_float(name, x, dtype):
    """Raise TypeError unless ``x`` is an ndarray of exactly ``dtype`` (nothing silently upcasts)."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name}: expected a numpy array of {np.dtype(dtype)}, got {type(x).__name__}")
    if x.dtype != dtype:
        raise TypeError(f"{name}: expected dtype {np.dtype(dtype)} (the parameters' dtype), "
                        f"got {x.dtype}; convert with .astype or use module.astype")
    return x


def check_upstream(name, d_out, dtype=None, shape=None):
    """An upstream gradient: an ndarray (of ``dtype`` and ``shape`` when given), never a tuple."""
    if isinstance(d_out, tuple):
        raise TypeError(f"{name}: expected the gradient of forward's output as one array, got a "
                        f"tuple of {len(d_out)}; a backward that returns several gradients "
                        f"(cross_entropy_backward gives (d_logits, None)) needs its first picked out")
    if not isinstance(d_out, np.ndarray):
        raise TypeError(f"{name}: expected a numpy array, got {type(d_out).__name__}")
    if dtype is not None and d_out.dtype != dtype:
        raise TypeError(f"{name}: expected dtype {np.dtype(dtype)} (the parameters' dtype), got "
                        f"{d_out.dtype}; convert with .astype({np.dtype(dtype).name})")
    if shape is not None and d_out.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)} (forward's output), got {d_out.shape}")
    return d_out


def check_last_dim(name, x, size):
    """ValueError unless the last axis of ``x`` has ``size`` entries (a feature width)."""
    if x.ndim < 1 or x.shape[-1] != size:
        raise ValueError(f"{name}: expected last dimension {size}, got shape {x.shape}")
    return x


def check_ids(name, ids, upper, what="vocabulary size"):
    """An integer array with 0 <= ids < upper."""
    ids = np.asarray(ids)
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"{name}: expected integer ids, got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= upper):
        bad = ids.min() if ids.min() < 0 else ids.max()
        raise ValueError(f"{name}: expected ids in [0, {upper}) ({what} {upper}), got {bad}")
    return ids


def check_token_ids(name, ids, vocab_size):
    """Integer ids of shape [B, N] in [0, vocab_size)."""
    ids = check_ids(name, ids, vocab_size)
    if ids.ndim != 2:
        raise ValueError(f"{name}: expected a [B, N] array of token ids, got shape {ids.shape}")
    if ids.size == 0:
        raise ValueError(f"{name}: expected at least one sequence of at least one token "
                         f"(B >= 1, N >= 1), got an empty batch of shape {ids.shape}")
    return ids


def check_positions(name, positions, max_len):
    """Integer positions [N] or [B, N]; with a position table (``max_len``) each one must fit in it."""
    positions = np.asarray(positions)
    if not np.issubdtype(positions.dtype, np.integer):
        raise TypeError(f"{name}: expected integer positions, got dtype {positions.dtype}")
    if positions.size and positions.min() < 0:
        raise ValueError(f"{name}: expected positions >= 0, got {positions.min()}")
    if max_len is not None and positions.size and positions.max() >= max_len:
        raise ValueError(f"{name}: sequence reaches position {positions.max()} but the position "
                         f"table has max_len {max_len}")
    return positions


def check_padding_idx(name, padding_idx, vocab_size):
    """None, or an integer row of a table with ``vocab_size`` rows: 0 <= padding_idx < vocab_size."""
    if padding_idx is None:
        return None
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, np.integer)) \
            or not 0 <= padding_idx < vocab_size:
        raise ValueError(f"{name}: expected None or an integer in [0, {vocab_size}), "
                         f"got {padding_idx!r}")
    return int(padding_idx)


def check_key_mask(name, key_mask, shape):
    """None, or a boolean array of exactly ``shape`` ([B, N], True at real tokens)."""
    if key_mask is None:
        return None
    key_mask = np.asarray(key_mask)
    if key_mask.dtype != bool or key_mask.shape != tuple(shape):
        raise ValueError(f"{name}: expected a boolean array of shape {tuple(shape)} (True at real "
                         f"tokens), got {key_mask.dtype} of shape {key_mask.shape}")
    return key_mask


def check_mask(mask, shape):
    """None, or a boolean "may read" mask that broadcasts to ``shape``."""
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise TypeError(f"mask: expected a boolean array (True = may read), got dtype {mask.dtype}")
    try:
        ok = np.broadcast_shapes(mask.shape, shape) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"mask: expected a shape that broadcasts to the scores {tuple(shape)}, "
                         f"got {mask.shape}")
    return mask


def qkv_shapes(q, k, v, grouped=True):
    """q [B, H, N, D], k [B, H_kv, M, D], v [B, H_kv, M, Dv] -> (B, H, N, D, H_kv, M), with H
    a multiple of H_kv (``grouped``) or equal to it."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, np.ndarray) or x.ndim != 4:
            raise ValueError(f"{name}: expected a [B, heads, positions, D] array, got "
                             f"{type(x).__name__ if not isinstance(x, np.ndarray) else x.shape}")
    B, H, N, D = q.shape
    H_kv, M = k.shape[1], k.shape[2]
    if k.shape[:1] + k.shape[3:] != (B, D) or v.shape[:3] != k.shape[:3]:
        raise ValueError(f"q, k, v: incompatible shapes {q.shape}, {k.shape}, {v.shape}")
    if not grouped and H_kv != H:
        raise ValueError(f"k: expected {H} heads like q, got {H_kv}; for key/value heads shared "
                         f"by several query heads use grouped_attention_forward")
    if H_kv == 0 or H % H_kv:
        raise ValueError(f"k: query heads {H} must be a multiple of key/value heads {H_kv}")
    return B, H, N, D, H_kv, M


def check_qkv(q, k, v):
    """q [B, H, N, D], k [B, H, M, D], v [B, H, M, Dv] (every query head its own keys)
    -> (B, H, N, D, M)."""
    B, H, N, D, _, M = qkv_shapes(q, k, v, grouped=False)
    return B, H, N, D, M


def check_grouped_qkv(q, k, v):
    """q [B, H, N, D], k [B, H_kv, M, D], v [B, H_kv, M, Dv] -> the group size H / H_kv."""
    _, H, _, _, H_kv, _ = qkv_shapes(q, k, v)
    return H // H_kv


def check_positive(name, value):
    """A positive integer (a count or a width)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return value


def check_optional_positive(name, value, default):
    """None (meaning ``default``, said in the message) or a positive integer."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                              or value < 1):
        raise ValueError(f"{name}: expected a positive integer or None ({default}), got {value!r}")
    return value


def _is_number(value):
    return not isinstance(value, bool) and isinstance(value, (int, float, np.floating, np.integer))


def check_eps(name, value):
    """A finite number > 0 (a norm's eps: 0 or below lets sqrt(var + eps) reach 0 or go NaN;
    also a base or a scale that must be positive)."""
    if not _is_number(value) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: expected a finite number > 0, got {value!r}")
    return value


def check_non_negative(name, value):
    """A finite number >= 0 (a standard deviation, a weight decay)."""
    if not _is_number(value) or not np.isfinite(value) or value < 0:
        raise ValueError(f"{name}: expected a finite number >= 0, got {value!r}")
    return value


def check_rng(rng):
    """The Generator a layer draws its weights from: ``rng`` itself, or the seeded default
    ``np.random.default_rng(0)`` when it is None (the same weights on every run)."""
    if rng is None:
        return np.random.default_rng(0)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng: expected a numpy.random.Generator or None, got {type(rng).__name__}")
    return rng


def check_window(window):
    """None, or an integer >= 1 (a sliding-window width)."""
    if window is not None and (isinstance(window, bool) or not isinstance(window, (int, np.integer))
                               or window < 1):
        raise ValueError(f"window: expected an integer >= 1 or None, got {window!r}")
    return window


def check_heads(d, n_heads, n_kv_heads=None, width="width d"):
    """A head layout: d divisible by n_heads, n_heads by n_kv_heads; returns n_kv_heads.

    ``width`` names the width in the message ("width d" for a module, "d_model" for a config).
    """
    check_positive(width.split()[-1], d)
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    if not isinstance(n_heads, (int, np.integer)) or n_heads < 1 or d % n_heads:
        raise ValueError(f"n_heads: {width}={d} must be divisible by n_heads, got n_heads={n_heads}")
    if not isinstance(n_kv_heads, (int, np.integer)) or n_kv_heads < 1 or n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads: n_heads={n_heads} must be divisible by n_kv_heads, "
                         f"got n_kv_heads={n_kv_heads}")
    return n_kv_heads


def check_choice(name, value, allowed):
    """One of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name}: expected one of {tuple(allowed)}, got {value!r}")
    return value


def check_states(name, states):
    """A float array [B, N, d] (hidden states)."""
    if not isinstance(states, np.ndarray) or states.ndim != 3 or \
            not np.issubdtype(states.dtype, np.floating):
        raise TypeError(f"{name}: expected a float array [B, N, d], got "
                        f"{getattr(states, 'dtype', type(states).__name__)} of shape {np.shape(states)}")
    return states


def check_reader_and_memory(x, memory):
    """x [B, N, d] reading memory [B, M, d_memory]: both 3-D, one batch."""
    if x.ndim != 3 or memory.ndim != 3 or x.shape[0] != memory.shape[0]:
        raise ValueError(f"x, memory: expected [B, N, d] and [B, M, d_memory] with the same B, "
                         f"got shapes {x.shape} and {memory.shape}")
    return x, memory
