"""Where there are no walls (no bubblewrap, or not Linux): the same processes and limits, no more.

A learner grading their own workspace on such a machine still gets a zygote, a process per
exercise and every limit; the zygote then runs as an ordinary process of theirs, and a learner's
process and whatever it started are ended by its session.
"""
from __future__ import annotations

import os
import signal
import sys
import tempfile
import time

from .bubblewrap import INSIDE


def unwalled_command(build, site_dirs, program):
    """The program without walls: the build first on its path, then ``site_dirs`` (no site
    module, so that no installed npformer comes first)."""
    boot = f"import sys; sys.path[:0] = {[build] + list(site_dirs)!r}\n{program}"
    return [os.path.realpath(sys.executable), "-I", "-S", "-c", boot]


def unwalled_environment():
    """The few variables a learner's process gets where no sandbox clears the rest."""
    return {**INSIDE, "HOME": tempfile.gettempdir(), "PATH": os.environ.get("PATH", "/usr/bin")}


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
    """Kill every process of session ``sid``."""
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
