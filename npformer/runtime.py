"""What a training run needs from the process around it: stop signals, a progress bar,
and how many cores the computation uses.

``StopSignals`` turns Ctrl-C (SIGINT), SIGTERM (sent by ``kill``, ``timeout`` and job
schedulers) and SIGHUP (a closed terminal) into a polite request: the loop finishes
its step, saves and returns. ``Progress`` draws the tqdm bar on stderr.
"""
from __future__ import annotations

import contextlib
import signal

from threadpoolctl import threadpool_limits

from .fast.parallel import on_cores


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



STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                     if hasattr(signal, name))


class StopSignals:
    """Turns the first SIGINT (Ctrl-C), SIGTERM or SIGHUP into a request to stop after the
    current step; a second one raises KeyboardInterrupt, except inside ``deferred()``
    (a save), after which it takes effect."""

    def __init__(self):
        self.signal = None            # the first signal received
        self.previous = {}
        self._saving = False
        self._pending = False

    @property
    def requested(self):
        """True once a stop signal has arrived."""
        return self.signal is not None

    def __enter__(self):
        for number in STOP_SIGNALS:
            try:
                self.previous[number] = signal.signal(number, self._handle)
            except ValueError:        # not the main thread: signals stay as they are
                break
        return self

    def _handle(self, signum, frame):
        if self.signal is None:
            self.signal = signum
        elif self._saving:
            self._pending = True
        else:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def deferred(self):
        """A block that a second signal does not cut short."""
        self._saving = True
        try:
            yield
        finally:
            self._saving = False
        if self._pending:
            raise KeyboardInterrupt

    def __exit__(self, *exc):
        for number, handler in self.previous.items():
            signal.signal(number, handler)
        return False


class Progress:
    """A tqdm bar on stderr (or nothing when disabled): steps, loss, tokens per second."""

    def __init__(self, total, initial, enabled):
        self.total, self.initial, self.enabled = total, initial, enabled
        self.bar = None

    @property
    def active(self):
        """True while a bar is shown."""
        return self.bar is not None

    def __enter__(self):
        if self.enabled:
            from tqdm import tqdm
            self.bar = tqdm(total=self.total, initial=self.initial, desc="training", unit="step",
                            mininterval=0.25, dynamic_ncols=True, leave=True)
        return self

    def advance(self, loss, tokens_per_second):
        """One more step done."""
        if self.bar is not None:
            self.bar.set_postfix_str(f"loss {loss:.4g}, {tokens_per_second:,.0f} tok/s", refresh=False)
            self.bar.update(1)

    def write(self, text):
        """Print a line above the bar."""
        self.bar.write(text)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
        return False
