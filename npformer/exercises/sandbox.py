"""Running a stranger's code in a process with limits, and ending all of it afterwards.

The pieces the judge (``runner``) puts around each learner's process: ``limiter(limits)``, run
in the child before its program, sets the resource limits of ``Limits`` (address space, CPU
seconds, file size, open files, processes), no core dumps, and death with its parent;
``CappedReader`` reads what it writes to fd 1 and fd 2 through one pipe keeping at most
``limits.output`` bytes (the rest is read and counted, so a writer never blocks and never
fills a disk); ``end_session`` kills every process left in its session, including children it
forked and detached from its process group. ``private`` makes the grading processes
non-dumpable.

What this does not stop: the code runs as the user who grades, so it can read and write
whatever that user can (the grader's own audit hook refuses some of it, see
``guard``; a container is the real boundary, see docs/teaching.md).
"""
from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass

GIB = 1 << 30
PR_SET_PDEATHSIG, PR_GET_DUMPABLE, PR_SET_DUMPABLE = 1, 3, 4       # prctl(2) options


def _libc():
    """The C library (for prctl), or None where it cannot be loaded."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc if hasattr(libc, "prctl") else None
    except (OSError, AttributeError):
        return None


def private():
    """Make this process non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): another process of the
    same user, a learner's among them, can no longer ptrace it or read its memory
    (/proc/PID/mem), and it leaves no core dump. Root is not stopped. It holds until this
    process execs (the learner's processes it starts are dumpable again). Linux only; True
    when it took effect, False elsewhere."""
    libc = _libc()
    return libc is not None and libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


def make_dumpable():
    """Undo ``private`` in a process forked from a private one (``nursery``'s children)."""
    libc = _libc()
    return libc is not None and libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0


@dataclass(frozen=True)
class Limits:
    """The limits of one graded process: ``memory`` bytes of address space, ``cpu`` and
    ``wall`` seconds, ``output`` bytes kept of what it prints, ``file_size`` bytes per file
    it writes, ``files`` open at once, ``processes`` it may start (threads included)."""

    memory: int = 4 * GIB
    cpu: float = 300.0
    wall: float = 120.0
    output: int = 256 * 1024
    file_size: int = 64 * 1024 * 1024
    files: int = 256
    processes: int = 32

    def __post_init__(self):
        for name in ("memory", "cpu", "wall", "output", "file_size", "files", "processes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name}: expected a positive number, got {value!r}")


def user_tasks(uid=None):
    """How many processes and threads the user ``uid`` (default: ours) runs now, as the kernel
    counts them for RLIMIT_NPROC (every thread of every process of the real user); None where
    /proc cannot tell."""
    uid = os.getuid() if uid is None else uid
    try:
        names = [n for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return None
    count = 0
    for name in names:
        try:
            with open(f"/proc/{name}/status", encoding="ascii", errors="replace") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue                         # it ended while we read
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            count += int(fields.get("Threads", "1").strip() or 1)
    return count


def dies_with_parent():
    """The function a child runs before its program (``preexec_fn``) so that it is killed
    when the process that started it dies (Linux; elsewhere it does nothing)."""
    libc = _libc()

    def apply():
        if libc is not None:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return apply


def limiter(limits, tasks_now=None):
    """The function a child runs before its program (``preexec_fn``): ``limits`` as resource
    limits, no core dumps, and killed when the process that started it dies, so that a
    learner's process never outlives its judge."""
    import resource
    orphaned = dies_with_parent()

    def apply():
        def cap(kind, value, spare=0):
            soft, hard = resource.getrlimit(kind)
            value = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
            top = value + spare if hard == resource.RLIM_INFINITY else min(value + spare, hard)
            resource.setrlimit(kind, (value, top))
        cap(resource.RLIMIT_AS, limits.memory)
        cap(resource.RLIMIT_CPU, max(1, int(limits.cpu)), spare=2)   # SIGXCPU first, then SIGKILL
        cap(resource.RLIMIT_FSIZE, limits.file_size)
        cap(resource.RLIMIT_NOFILE, limits.files)
        if tasks_now is not None:
            # RLIMIT_NPROC caps the processes and threads of the whole user, not of this process
            # alone: the cap is what the user runs now (the grader, other jobs, this child) plus
            # ``processes``, so a fork bomb stops after that many while the rest of the user's
            # work goes on. The kernel does not apply it to root (nor with CAP_SYS_RESOURCE):
            # there the session kill below is what ends the children.
            cap(resource.RLIMIT_NPROC, tasks_now + 1 + limits.processes)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))   # no core dumps of a 4 GiB process
        orphaned()
    return apply


def session_members(sid):
    """The pids of the live processes of session ``sid`` (read from /proc; [] elsewhere)."""
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        # after the command's name: state, ppid, pgrp, session
        if len(fields) > 3 and fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(name))
    return found


def end_session(sid):
    """Kill every process of session ``sid`` (its process group first); how many were alive."""
    members = [pid for pid in session_members(sid) if pid != os.getpid()]
    try:
        os.killpg(sid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for _ in range(3):                       # a fork may land between reading /proc and killing
        for pid in session_members(sid):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not session_members(sid):
            break
        time.sleep(0.05)
    return len(members)


class CappedReader(threading.Thread):
    """Reads a pipe to its end, keeping the first ``cap`` bytes and counting the rest."""

    def __init__(self, stream, cap):
        super().__init__(daemon=True)
        self.stream, self.cap, self.kept, self.dropped = stream, cap, bytearray(), 0

    def run(self):
        while True:
            chunk = self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536)
            if not chunk:
                return
            room = self.cap - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
            self.dropped += max(0, len(chunk) - max(room, 0))
