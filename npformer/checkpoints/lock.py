"""One writer per checkpoint directory: a lock file held while a run trains into it.

``writer_lock(directory)`` creates ``directory/.npformer-writer.lock`` and holds an
exclusive ``fcntl.flock`` on it for as long as the ``with`` block runs. The kernel drops a
flock when its process ends, however it ends (an exception, a signal, ``kill -9``), so a
lock can never outlive its writer. A second writer finds the lock held and gets
``CheckpointBusy`` naming the pid that holds it. The file records the holder's pid; when a
run is killed the file stays behind, unlocked: the next writer finds it free, names the
dead pid in ``lock.stale`` and takes it over. A clean exit removes the file.

Readers (``generate``, ``read_checkpoint``) take no lock: a checkpoint becomes current by
one atomic rename of ``checkpoint.json``, after its folder is complete.

Within one process the lock is re-entrant (the CLI takes it before preparing the data,
the training loop takes it again), counted, and released when the outermost holder ends.
"""
from __future__ import annotations

import contextlib
import os

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locking, documented
    fcntl = None

LOCK_FILE = ".npformer-writer.lock"


class CheckpointBusy(ValueError):
    """Another process is writing checkpoints into this directory."""


def _alive(pid):
    """True if a process with this pid exists (on this machine)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:             # exists, owned by someone else
        return True
    return True


def _recorded_pid(fd):
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").split()
        return int(text[0]) if text else None
    except (OSError, ValueError):
        return None


class WriterLock:
    """The held lock of one directory: its ``path``, and ``stale``, the pid of a dead run
    whose leftover lock file was taken over (None if there was none)."""

    def __init__(self, directory):
        self.directory = os.fspath(directory)
        self.path = os.path.join(self.directory, LOCK_FILE)
        self.stale = None
        self.fd = None
        self.depth = 0

    def acquire(self):
        os.makedirs(self.directory, exist_ok=True)
        if fcntl is None:  # pragma: no cover
            return self
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _recorded_pid(fd)
                os.close(fd)
                who = f"pid {holder}" if holder else "another process"
                raise CheckpointBusy(f"{self.directory} is being written by another training run "
                                     f"({who}, lock file {self.path}); wait for it to finish or "
                                     f"choose another directory") from None
            # The holder before us may have removed the file between our open and our lock:
            # then we hold a lock on a name nobody sees; start again on the new file.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        previous = _recorded_pid(fd)
        if previous and previous != os.getpid() and not _alive(previous):
            self.stale = previous
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self.fd = fd
        return self

    def release(self):
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.remove(self.path)            # removed while held: no one can be waiting on it
        os.close(self.fd)                   # closing drops the flock
        self.fd = None


_held = {}          # real path of a directory -> its WriterLock, in this process


@contextlib.contextmanager
def writer_lock(directory, on_stale=None):
    """Hold the writer lock of ``directory`` (created if needed) for the ``with`` block.

    Raises ``CheckpointBusy`` if another process holds it. ``on_stale(text)`` is called
    with one line when a dead run's lock file is taken over.
    """
    os.makedirs(directory, exist_ok=True)
    key = os.path.realpath(directory)
    lock = _held.get(key)
    if lock is None:
        lock = WriterLock(directory).acquire()
        _held[key] = lock
        if lock.stale is not None and on_stale is not None:
            on_stale(f"took over the lock {lock.path} left by pid {lock.stale}, which is no "
                     f"longer running (that run was killed; its last checkpoint is kept)")
    lock.depth += 1
    try:
        yield lock
    finally:
        lock.depth = lock.depth - 1
        if lock.depth == 0:
            del _held[key]
            lock.release()
