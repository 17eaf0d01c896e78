"""Settings of the whole process: made only by the programs that want them, at their entry point.

Importing npformer changes none of them, and no library function (a concept file, the fast
track, the training loop's maths, the file formats) sets the first two. This is the one place
that lists them, what they do and who makes them.

``cores.limit_blas_threads(n)`` -- BLAS threads per call (a ``with`` block).
    BLAS keeps one thread pool for the whole process (numpy's default: one thread per core).
    ``n`` >= 1: BLAS runs one thread per call and the fast track cuts its own work into at
    most ``n`` row blocks run at once; 0: BLAS stays as configured. Made by ``npformer train``
    and ``npformer demo`` (``--threads``, default 1: one core, the fastest on a machine that
    other processes share), the benchmark's "BLAS 1 thread" worker, and the tests that train
    (one thread). ``OPENBLAS_NUM_THREADS`` and friends, set before Python starts, do the same
    for BLAS.

``memory.keep_freed_memory()`` -- the C allocator keeps freed blocks for reuse (glibc).
    A training step frees and allocates the same large arrays every step; kept, they are not
    page-faulted in again. Made by ``npformer train`` and ``npformer demo`` and by the
    benchmark's fast workers. It cannot be undone, so a program makes it once, where it starts.

``signals.StopSignals`` -- Ctrl-C, SIGTERM and SIGHUP as a request to stop after the step.
    Signal handlers belong to the process; ``npformer.training.loop.train`` installs them for
    the length of a run, in the main thread only, and restores the previous ones after.

Not a setting of the process: the track (``npformer.track``) and the fast track's own
threads (``npformer.fast.use_cores``, ``on_cores``) are context variables of the calling
thread. The fast track uses every available core by itself, in the way that cannot be slower
than leaving BLAS its own threads: while BLAS has several threads the fast kernels leave the
cores to them; when BLAS runs one thread per call (the program's choice above) they cut their
work into row blocks, one per core (``npformer.fast.parallel``).
"""
