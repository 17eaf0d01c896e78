"""The fast track's threads: its kernels' work cut into row blocks computed at once.

NumPy releases the GIL inside its ufuncs and BLAS calls, so two Python threads working on
two halves of an array run on two cores. The fast kernels cut their work (matrix products,
GELU, softmax, the norms, the loss, the optimizer update) into row blocks and run them at
once on a pool of threads, one block per core, when that pays:

- **BLAS runs one thread per call** (a program chose so, e.g. ``npformer.runtime.cores.
  limit_blas_threads``, or ``OPENBLAS_NUM_THREADS=1``): every available core gets a block.
- **BLAS has threads of its own** (numpy's default: one per core): the pool stands aside.
  The matrix products are BLAS's to thread, and the elementwise work stays on the calling
  thread: after each product BLAS's threads keep spinning for a while on the very cores a
  second set of threads would need, and two sets of threads on the same cores are slower
  than either alone.

So choosing the fast track needs no further call, never pins BLAS (a setting of the whole
process, left to programs) and is never slower than leaving BLAS its own threads: it is
exactly that unless BLAS runs one thread per call. The choice below is per thread (a
context variable, like the track):

    npformer.fast.use_cores(2)                  # at most 2 blocks (default: every core)
    with npformer.fast.on_cores(4, min_work=1, beside_blas=True): ...   # what the tests do
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

MIN_WORK = 1 << 17


class CoreSetting(NamedTuple):
    """How the fast kernels of one thread split their work."""

    cores: int | None = None       # blocks at most (None: every available core)
    min_work: int = MIN_WORK       # elements of work a block gets at least
    beside_blas: bool = False      # split even while BLAS runs threads of its own


_setting = contextvars.ContextVar("npformer_cores", default=CoreSetting())
_pool = {"executor": None, "threads": 0, "blas": None, "cores": None}
_lock = threading.Lock()


def available_cores():
    """The cores this process may run on (read once: the fast kernels ask before each split)."""
    if _pool["cores"] is None:
        try:
            _pool["cores"] = len(os.sched_getaffinity(0))
        except AttributeError:                               # pragma: no cover - not Linux
            _pool["cores"] = os.cpu_count() or 1
    return _pool["cores"]


def _thread_counters(controllers):
    """A zero-argument function per BLAS library, returning its threads per call now.

    threadpoolctl's ``num_threads`` looks the library's symbol up on every read (a few
    microseconds, and the fast kernels ask before each split): OpenBLAS's own counter is
    looked up once here and called directly; another library is read through threadpoolctl.
    """
    counters = []
    for library in controllers:
        symbol = None
        if getattr(library, "internal_api", None) == "openblas" and \
                getattr(library, "threading_layer", None) != "openmp":
            try:
                symbol = library._get_symbol("openblas_get_num_threads")
            except Exception:                                # pragma: no cover - another version
                symbol = None
        counters.append(symbol if symbol is not None else (lambda library=library: library.num_threads))
    return counters


def blas_threads():
    """Threads BLAS runs per call now: the most of any BLAS library loaded when the fast track
    first asked (0 when threadpoolctl cannot tell). A cheap call into each library."""
    counters = _pool["blas"]
    if counters is None:
        with _lock:
            if _pool["blas"] is None:
                try:
                    from threadpoolctl import ThreadpoolController
                    controllers = ThreadpoolController().select(user_api="blas").lib_controllers
                except Exception:                            # pragma: no cover - no threadpoolctl
                    controllers = []
                _pool["blas"] = _thread_counters(controllers)
            counters = _pool["blas"]
    most = 0
    for count in counters:
        most = max(most, count() or 0)
    return most


def cores():
    """How many blocks the fast kernels of this thread cut their work into now (1: no threads)."""
    setting = _setting.get()
    chosen = setting.cores or available_cores()
    if chosen > 1 and not setting.beside_blas and blas_threads() != 1:
        return 1                                             # BLAS threads the products itself
    return chosen


def _check(name, value, allow_none=False):
    if allow_none and value is None:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: expected a positive integer{' or None' if allow_none else ''}, "
                         f"got {value!r}")
    return value


def use_cores(n=None, min_work=MIN_WORK, beside_blas=False):
    """Let the fast kernels of this thread cut their work into at most ``n`` blocks (None: one
    per available core; 1: no threads), each of at least ``min_work`` elements of work (about
    0.1 ms of elementwise arithmetic by default). ``beside_blas``: split even while BLAS has
    threads of its own. Returns the previous ``n``. Changes no BLAS setting."""
    previous = _setting.get().cores
    _setting.set(CoreSetting(_check("n", n, True), _check("min_work", min_work), bool(beside_blas)))
    return previous


@contextlib.contextmanager
def on_cores(n=None, min_work=MIN_WORK, beside_blas=False):
    """``use_cores(n, min_work, beside_blas)`` inside a ``with`` block only."""
    token = _setting.set(CoreSetting(_check("n", n, True), _check("min_work", min_work),
                                     bool(beside_blas)))
    try:
        yield n
    finally:
        _setting.reset(token)


def blocks(n_rows, row_work=1):
    """Up to ``cores()`` contiguous slices covering range(n_rows), each with at least
    ``min_work`` elements of work when a row costs ``row_work``."""
    parts = cores()
    if parts > 1:
        parts = min(parts, n_rows, n_rows * row_work // _setting.get().min_work)
    if parts <= 1:
        return [slice(0, n_rows)]
    edges = [n_rows * i // parts for i in range(parts + 1)]
    return [slice(edges[i], edges[i + 1]) for i in range(parts)]


def _executor(threads):
    """The shared pool, grown to at least ``threads`` threads."""
    with _lock:
        if _pool["threads"] < threads:
            # the smaller pool is not shut down: a thread may still be submitting to it; its
            # idle threads end when it is no longer referenced
            _pool["executor"] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="npformer")
            _pool["threads"] = threads
        return _pool["executor"]


def run_blocks(work, n_rows, row_work=1):
    """Call ``work(rows)`` for each block of ``blocks(n_rows, row_work)``, at once on the pool;
    returns the results in block order. The calling thread takes the first block.

    ``row_work``: elements of elementwise work one row costs (a row of a matrix product
    with an [a, b] matrix counts about a * b / 32: BLAS does dozens of multiply-adds in the
    time of one elementwise operation)."""
    return run_parts(work, blocks(n_rows, row_work))


def run_parts(work, parts):
    """Call ``work(part)`` for each slice of ``parts`` at once on the pool (the calling thread
    takes the first); returns the results in order."""
    if len(parts) == 1:
        return [work(parts[0])]
    pool = _executor(len(parts) - 1)
    futures = [pool.submit(work, rows) for rows in parts[1:]]
    first = work(parts[0])
    return [first] + [f.result() for f in futures]
