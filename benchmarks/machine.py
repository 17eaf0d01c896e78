"""Facts about the machine and the processes: CPU, load, memory, thread pools, OpenBLAS settings.

Nothing here imports numpy or torch at module level: the parent process uses it too.
"""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def cpu_model():
    """The CPU's model name from /proc/cpuinfo (or what platform knows)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average():
    """The 1-minute load average (runnable processes; 2.0 fills this machine's two cores)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def machine_busy_seconds():
    """CPU seconds all processes have spent busy since boot (/proc/stat, every core summed)."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]                  # idle and iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid):
    """CPU seconds (user + system, all threads) process ``pid`` has used, or 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class OtherLoad:
    """The share of the machine's cores that processes other than ours kept busy.

    Started before a measurement and read after it: (all busy CPU time - ours) divided
    by (wall time x cores). 0% means the timed workers had the machine to themselves.
    """

    def __init__(self, pids):
        import time
        self.pids, self.clock = list(pids) + [os.getpid()], time.perf_counter
        self.start = self._snapshot()

    def _snapshot(self):
        return (self.clock(), machine_busy_seconds(), sum(process_cpu_seconds(p) for p in self.pids))

    def share(self):
        wall, busy, ours = (b - a for a, b in zip(self.start, self._snapshot()))
        return max(0.0, (busy - ours) / (wall * (os.cpu_count() or 1))) if wall > 0 else 0.0


def rss(field="VmRSS"):
    """Current RSS (VmRSS) or its high-water mark since exec (VmHWM), in bytes.

    ``getrusage``'s ru_maxrss is not used: Linux carries it across exec, so a child
    would report its parent's peak.
    """
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def threadpools():
    """Every thread pool threadpoolctl finds in this process (BLAS kernel, threads, version)."""
    from threadpoolctl import threadpool_info
    keys = ("user_api", "internal_api", "version", "architecture", "num_threads", "threading_layer")
    return [{k: pool.get(k) for k in keys if pool.get(k) is not None} | {"file": Path(pool["filepath"]).name}
            for pool in threadpool_info()]


def openblas_settings(environ):
    """The OpenBLAS settings to measure: [(label, environment for the workers)].

    "environment": the variables as they are; "unset": both removed. When the
    environment sets neither, the two are the same setting and it is measured once,
    under the label "unset".
    """
    unset = {k: v for k, v in environ.items() if k not in OPENBLAS_VARS}
    if not any(v in environ for v in OPENBLAS_VARS):
        return [("unset", unset)]
    return [("unset", unset), ("environment", dict(environ))]


def describe_openblas(environ):
    """"OPENBLAS_CORETYPE=Haswell, OPENBLAS_L2_SIZE unset" for an environment."""
    return ", ".join(f"{v}={environ[v]}" if v in environ else f"{v} unset" for v in OPENBLAS_VARS)


def git_commit(directory):
    """The commit checked out in ``directory`` (with "+changes" when the tree is dirty), or None."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=directory,
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=directory,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (commit + ("+changes" if dirty else "")) or None
