"""Shared helpers of the cross-check tier: relative errors, recorded for the closing summary."""
from __future__ import annotations

import numpy as np

# "tier: name" -> worst relative error seen (printed by conftest's terminal summary)
WORST: dict[str, float] = {}


def as_numpy(x):
    """A torch tensor or array-like as a float64 ndarray (a torch tensor is detached first)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def rel_err(ours, theirs):
    """max |ours - theirs| / max |theirs|: one number per tensor, 0 when both are zero."""
    ours, theirs = as_numpy(ours), as_numpy(theirs)
    assert ours.shape == theirs.shape, f"shapes differ: ours {ours.shape}, theirs {theirs.shape}"
    scale = np.abs(theirs).max(initial=0.0)
    diff = np.abs(ours - theirs).max(initial=0.0)
    return float(diff / scale) if scale > 0 else float(diff)


def check(key, what, ours, theirs, tol):
    """Assert rel_err <= tol, remember the worst error under ``key``, report the worst index."""
    err = rel_err(ours, theirs)
    WORST[key] = max(WORST.get(key, 0.0), err)
    if not err <= tol:
        o, t = as_numpy(ours), as_numpy(theirs)
        worst = np.unravel_index(np.argmax(np.abs(o - t)), o.shape) if o.size else ()
        raise AssertionError(f"{key} {what}: relative error {err:.3e} > tol {tol:.0e} "
                             f"(worst at {worst}: ours {o[worst]!r}, theirs {t[worst]!r})")
    return err
