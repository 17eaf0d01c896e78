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

_state = {"cores": 1, "pool": None, "blas_limit": None, "min_work": 1 << 17}


def available_cores():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                                   # pragma: no cover - not Linux
        return os.cpu_count() or 1


def cores():
    """How many cores the fast kernels use now."""
    return _state["cores"]


def use_cores(n, min_work=1 << 17):
    """Split the fast kernels' work over ``n`` cores (1: no threads); returns the previous count.

    ``min_work``: a block gets at least this many elements of work (about 0.1 milliseconds
    of elementwise arithmetic: less is not worth handing to a thread).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n: expected a positive integer number of cores, got {n!r}")
    if isinstance(min_work, bool) or not isinstance(min_work, int) or min_work < 1:
        raise ValueError(f"min_work: expected a positive integer, got {min_work!r}")
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
    _state["cores"], _state["min_work"] = n, min_work
    return previous


@contextlib.contextmanager
def on_cores(n, min_work=1 << 17):
    """``use_cores(n, min_work)`` inside a ``with`` block only."""
    previous, previous_work = _state["cores"], _state["min_work"]
    use_cores(n, min_work)
    try:
        yield n
    finally:
        use_cores(previous, previous_work)


def blocks(n_rows, row_work=1):
    """Up to ``cores()`` contiguous slices covering range(n_rows), each with at least
    ``min_work`` elements of work when a row costs ``row_work``."""
    parts = max(1, min(_state["cores"], n_rows, n_rows * row_work // _state["min_work"]))
    edges = [n_rows * i // parts for i in range(parts + 1)]
    return [slice(edges[i], edges[i + 1]) for i in range(parts)]


def run_blocks(work, n_rows, row_work=1):
    """Call ``work(rows)`` for each block of ``blocks(n_rows, row_work)``, at once on the pool;
    returns the results in block order. The calling thread takes the first block.

    ``row_work``: elements of elementwise work one row costs (a row of a matrix product
    with an [a, b] matrix counts about a * b / 32: BLAS does dozens of multiply-adds in the
    time of one elementwise operation)."""
    parts = blocks(n_rows, row_work)
    if len(parts) == 1:
        return [work(parts[0])]
    futures = [_state["pool"].submit(work, rows) for rows in parts[1:]]
    first = work(parts[0])
    return [first] + [f.result() for f in futures]
