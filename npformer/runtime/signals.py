"""Stop signals: a program that trains turns them into a polite request to stop.

``StopSignals`` turns Ctrl-C (SIGINT), SIGTERM (sent by ``kill``, ``timeout`` and job
schedulers) and SIGHUP (a closed terminal) into a request: the loop finishes its step,
saves and returns. Signal handlers belong to the whole process, so only the programs
that train install them (``with StopSignals() as stop: ...``).
"""
from __future__ import annotations

import contextlib
import signal



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
