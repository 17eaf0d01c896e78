"""How many cores a program computes on: a setting of the whole process.

BLAS libraries keep a thread pool for the whole process, so limiting them is a decision
for the program that runs (the ``npformer`` commands, the benchmarks), never for a
library call.
"""
from __future__ import annotations

import contextlib

from threadpoolctl import threadpool_limits

from ..fast.parallel import on_cores


@contextlib.contextmanager
def limit_blas_threads(n):
    """Compute on ``n`` cores (0: leave everything as configured).

    BLAS runs one thread per call, and the fast track splits its work (matrix products,
    elementwise kernels, the optimizer) into ``n`` row blocks run at once
    (``npformer.fast.use_cores``). With n = 1 everything runs on the calling thread:
    on a machine that other processes share, often the fastest.
    """
    if not n:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"), on_cores(n):
        yield
