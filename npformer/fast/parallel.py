"""Running the fast kernels on several cores: row blocks on a small pool of threads.

NumPy releases the GIL inside its ufuncs and BLAS calls, so two Python threads working on
two halves of an array run on two cores. ``use_cores(n)`` makes the fast kernels split
their work (matrix products, GELU, softmax, norms, the optimizer update) into n row blocks
run at once, and limits BLAS to one thread per call: a BLAS library left with its own
threads keeps them spinning after each product, on the very cores the elementwise work
needs. ``use_cores(1)`` (the default) runs everything on the calling thread and leaves BLAS
as it was configured.

    import npformer.fast
    npformer.fast.use_cores(2)        # what npformer train and the benchmarks do
"""
from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor

_state = {"cores": 1, "pool": None, "blas_limit": None, "min_rows": 64}


def available_cores():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                                   # pragma: no cover - not Linux
        return os.cpu_count() or 1


def cores():
    """How many cores the fast kernels use now."""
    return _state["cores"]


def use_cores(n, min_rows=64):
    """Split the fast kernels' work over ``n`` cores (1: no threads); returns the previous count.

    ``min_rows``: a block gets at least this many rows (smaller work is not worth a thread).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n: expected a positive integer number of cores, got {n!r}")
    if isinstance(min_rows, bool) or not isinstance(min_rows, int) or min_rows < 1:
        raise ValueError(f"min_rows: expected a positive integer, got {min_rows!r}")
    previous = _state["cores"]
    if _state["pool"] is not None:
        _state["pool"].shutdown(wait=True)
        _state["pool"] = None
    if _state["blas_limit"] is not None:
        _state["blas_limit"].restore_original_limits()
        _state["blas_limit"] = None
    if n > 1:
        from threadpoolctl import threadpool_limits
        _state["blas_limit"] = threadpool_limits(limits=1, user_api="blas")
        _state["pool"] = ThreadPoolExecutor(max_workers=n - 1, thread_name_prefix="npformer")
    _state["cores"], _state["min_rows"] = n, min_rows
    return previous


@contextlib.contextmanager
def on_cores(n, min_rows=64):
    """``use_cores(n, min_rows)`` inside a ``with`` block only."""
    previous, previous_rows = _state["cores"], _state["min_rows"]
    use_cores(n, min_rows)
    try:
        yield n
    finally:
        use_cores(previous, previous_rows)


def blocks(n_rows):
    """Up to ``cores()`` contiguous slices covering range(n_rows), none under ``min_rows``."""
    parts = max(1, min(_state["cores"], n_rows // _state["min_rows"]))
    edges = [n_rows * i // parts for i in range(parts + 1)]
    return [slice(edges[i], edges[i + 1]) for i in range(parts)]


def run_blocks(work, n_rows):
    """Call ``work(rows)`` for each block of ``blocks(n_rows)``, at once on the pool; returns
    the results in block order. The calling thread takes the first block."""
    parts = blocks(n_rows)
    if len(parts) == 1:
        return [work(parts[0])]
    futures = [_state["pool"].submit(work, rows) for rows in parts[1:]]
    first = work(parts[0])
    return [first] + [f.result() for f in futures]
