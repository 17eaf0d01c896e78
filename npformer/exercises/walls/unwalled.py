"""Where there are no walls (no bubblewrap, or not Linux): the same processes and limits, no more.

A learner grading their own workspace on such a machine still gets a zygote, a process per
exercise and every limit; the zygote then runs as an ordinary process of theirs, and a learner's
process and whatever it started in its process group are killed together.
"""
from __future__ import annotations

import os
import signal
import sys
import tempfile

from .bubblewrap import INSIDE


def unwalled_command(build, site_dirs, program):
    """The program without walls: the build first on its path, then ``site_dirs`` (no site
    module, so that no installed npformer comes first)."""
    boot = f"import sys; sys.path[:0] = {[build] + list(site_dirs)!r}\n{program}"
    return [os.path.realpath(sys.executable), "-I", "-S", "-c", boot]


def unwalled_environment():
    """The few variables a learner's process gets where no sandbox clears the rest."""
    return {**INSIDE, "HOME": tempfile.gettempdir(), "PATH": os.environ.get("PATH", "/usr/bin")}


def end_group(pid):
    """Kill learner's process ``pid`` and its process group (it leads one: ``os.setsid``)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
