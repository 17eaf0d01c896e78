"""Fast twin of ``npformer.t19_optim.adamw_update``: the update in place, rows split over cores.

No array is allocated per step: the moments and the parameter are updated in place with
``out=`` and augmented assignment, and the one temporary the update needs lives in a
scratch buffer kept between calls (as large as the largest parameter seen so far, one per
calling thread), one slice per row block. Arrays that cannot be overwritten (read-only,
a stride-0 axis, sharing memory with another argument) are updated in copies instead,
which are returned: the plain update's results, as new arrays.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from ..t19_optim import adamw_update as plain_adamw_update
from ..core.track import twin_of
from .functional import as_rows, contiguous
from .parallel import run_blocks

_SCRATCH = threading.local()          # two threads updating at once each have their own


def scratch_like(a):
    """A reusable C-contiguous array of a's shape and dtype (its contents are garbage)."""
    buffers = _SCRATCH.__dict__.setdefault("buffers", {})
    buffer = buffers.get(a.dtype)
    if buffer is None or buffer.size < a.size:
        buffer = buffers[a.dtype] = np.empty(a.size, a.dtype)
    return buffer[:a.size].reshape(a.shape)


def overwritable(arrays, others):
    """True when each of ``arrays`` may be updated in place: writeable, no axis of stride 0
    (one memory element standing for several entries), sharing memory with no other argument."""
    for i, a in enumerate(arrays):
        if not a.flags.writeable or any(st == 0 and n > 1 for st, n in zip(a.strides, a.shape)):
            return False
        if any(np.may_share_memory(a, b) for b in arrays[i + 1:] + others):
            return False
    return True


def _update_rows(data, grad, m, v, scratch, step, lr, betas, eps, weight_decay):
    t = data.dtype.type
    b1, b2 = betas
    m *= t(b1)                                        # m = b1 m + (1 - b1) g
    np.multiply(grad, t(1 - b1), out=scratch)
    m += scratch
    v *= t(b2)                                        # v = b2 v + (1 - b2) g^2
    np.multiply(grad, grad, out=scratch)
    scratch *= t(1 - b2)
    v += scratch
    # sqrt(v_hat) + eps = sqrt(v) / sqrt(1 - b2^t) + eps
    np.sqrt(v, out=scratch)
    scratch *= t(1 / math.sqrt(1 - b2 ** step))
    scratch += t(eps)
    if weight_decay:                                  # decoupled: p -= lr * wd * p
        data *= t(1 - lr * weight_decay)
    np.divide(m, scratch, out=scratch)                # m / (sqrt(v_hat) + eps)
    scratch *= t(lr / (1 - b1 ** step))               # m_hat = m / (1 - b1^t)
    data -= scratch


@twin_of(plain_adamw_update)
def adamw_update(data, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    """Twin of ``npformer.t19_optim.adamw_update``: overwrites ``data``, ``m`` and ``v`` and
    returns them (or updates copies and returns those, when they cannot be overwritten)."""
    if not overwritable([data, m, v], [grad]):
        data, m, v = (np.array(a, order="C") for a in (data, m, v))
    if not all(a.flags.c_contiguous for a in (data, m, v)):     # row views would be copies
        _update_rows(data, grad, m, v, scratch_like(data), step, lr, betas, eps, weight_decay)
        return data, m, v
    arrays = [as_rows(a) for a in (data, contiguous(grad), m, v, scratch_like(data))]
    run_blocks(lambda s: _update_rows(*(a[s] for a in arrays), step, lr, betas, eps, weight_decay),
               len(arrays[0]), arrays[0].shape[1])
    return data, m, v
