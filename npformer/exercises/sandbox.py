"""The walls around a learner's code: what the kernel enforces, set up through bubblewrap.

Each submission is graded inside a sandbox of its own, made by bubblewrap (``bwrap``, the
distribution's package, as Flatpak uses it): new user, PID, network, IPC, UTS and mount
namespaces, no capabilities, a new session, no further user namespaces, and a seccomp filter
(libseccomp, through ``pyseccomp``) that refuses sockets, System V and POSIX message queues,
kernel keyrings, tracing another process and the kernel's other doors (``DENIED``). A
learner's process adds a filter of its own once forked (``no_new_processes``): it cannot start
a process or run a program (as root, the kernel does not count processes: no process limit
would stop a fork bomb), only threads, which its memory limit bounds. Its view of
the file system, read-only: the system's libraries, Python's standard library, the third-party
packages npformer imports, the hand-out build (``grading_build``) and this submission's files;
a writable ``/scratch`` of ``Limits.scratch`` bytes (its ``HOME`` and ``TMPDIR``); nothing else (no home, no other submission, no
installed npformer, no grader's or teacher's file). Its environment is a few fixed variables.
Everything in it dies with it: the PID namespace ends every process when its first one ends, and
bubblewrap ends when the judge that started it does.

``detect()`` says what this machine can enforce (``Isolation.line()`` is the line ``npformer
grade`` prints); ``command()`` builds the ``bwrap`` command. Where there is no bubblewrap (or it
cannot make namespaces here), a learner's own workspace is graded with the same processes and
limits but no walls, and the line says so.

Inside the sandbox, each learner's process also gets resource limits (``limiter``): address
space, CPU seconds, file size, open files, processes.
"""
from __future__ import annotations

import errno
import functools
import glob
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass

GIB, MIB = 1 << 30, 1 << 20
TIMEOUT = 120.0                  # seconds of its own computing one exercise may take (``--timeout``)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4          # prctl(2) options
BUILD_AT, SUBMISSION_AT, SCRATCH_AT = "/grading", "/submission", "/scratch"   # where the sandbox sees them
NAMESPACES = "user, pid, net, ipc, uts, mount namespaces"
# what the learner's code may not do even inside its namespaces (refused with EPERM)
DENIED = ("socket", "socketpair", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
          "shmget", "shmat", "msgget", "msgsnd", "msgrcv", "semget", "semop", "semtimedop",
          "mq_open", "mq_timedsend", "mq_timedreceive", "mq_notify", "keyctl", "add_key", "request_key",
          "perf_event_open", "bpf", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
          "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "open_by_handle_at",
          "name_to_handle_at", "fanotify_init", "syslog", "acct", "swapon", "swapoff", "reboot",
          "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module")
TIOCSTI = 0x5412                                  # ioctl that types into a terminal
CLONE_THREAD = 0x00010000
# what a learner's process may not do besides (the zygote forks them): start a process or run a program
NO_PROCESSES = ("fork", "vfork", "execve", "execveat")


@dataclass(frozen=True)
class Limits:
    """The limits of one learner's process: ``memory`` bytes of address space, ``cpu`` and
    ``wall`` seconds, ``output`` bytes kept of what it prints, ``file_size`` bytes per file it
    writes, ``files`` open at once, ``processes`` it may start (threads included), ``scratch``
    bytes of its writable scratch folder."""

    memory: int = 4 * GIB
    cpu: float = 300.0
    wall: float = TIMEOUT
    output: int = 256 * 1024
    file_size: int = 64 * MIB
    files: int = 256
    processes: int = 32
    scratch: int = 256 * MIB

    def __post_init__(self):
        for name in ("memory", "cpu", "wall", "output", "file_size", "files", "processes", "scratch"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name}: expected a positive number, got {value!r}")


# -- what this machine can enforce -------------------------------------------------------------
@dataclass(frozen=True)
class Isolation:
    """``bwrap``: the bubblewrap executable that works here, or None; ``seccomp``: True when
    the filter can be built; ``why_not``: what is missing, in a few words, when ``bwrap`` is None."""

    bwrap: str | None
    seccomp: bool
    why_not: str = ""

    def line(self):
        """ "isolation: bubblewrap (user, pid, ...), seccomp (...)" or "isolation: none (...)"."""
        if self.bwrap is None:
            return f"isolation: none ({self.why_not}): the code runs as you, with limits only"
        filtered = "seccomp" if self.seccomp else "no seccomp (pip install pyseccomp)"
        return f"isolation: bubblewrap ({NAMESPACES}), {filtered}"


def _seccomp_module():
    try:
        import pyseccomp
        pyseccomp.SyscallFilter(pyseccomp.ALLOW)
        return pyseccomp
    except (ImportError, OSError, RuntimeError, AttributeError):
        return None


@functools.lru_cache(maxsize=None)
def detect():
    """The ``Isolation`` this machine offers (probed once per process)."""
    seccomp = _seccomp_module() is not None
    if not sys.platform.startswith("linux"):
        return Isolation(None, False, f"bubblewrap needs Linux, this is {sys.platform}")
    found = shutil.which("bwrap")
    if found is None:
        return Isolation(None, seccomp, "bubblewrap is not installed: apt install bubblewrap")
    probe = subprocess.run([found, "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
                            "--die-with-parent", "--ro-bind", "/", "/", "--", sys.executable, "-I", "-S", "-c", ""],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if probe.returncode != 0:
        said = (probe.stderr.strip().splitlines() or ["no message"])[-1][:200]
        return Isolation(None, seccomp, f"bubblewrap cannot make namespaces here: {said}")
    return Isolation(found, seccomp)


def no_new_processes():
    """In a learner's process (once forked): from now on it cannot start a process or run a
    program; threads it may still start (``clone`` with CLONE_THREAD; ``clone3`` says it is not
    there, and the C library falls back to ``clone``). False where no filter can be built."""
    seccomp = _seccomp_module()
    if seccomp is None:
        return False
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in NO_PROCESSES:
        rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    rules.load()
    return True


def seccomp_file():
    """An open file holding the compiled filter (``DENIED``, and TIOCSTI), for ``--seccomp``."""
    seccomp = _seccomp_module()
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED:
        try:
            rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):
            pass                                   # not a system call on this architecture
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "ioctl", seccomp.Arg(1, seccomp.EQ, TIOCSTI))
    compiled = tempfile.TemporaryFile()
    rules.export_bpf(compiled)
    compiled.seek(0)
    return compiled


# -- the view ----------------------------------------------------------------------------------
def _site_dirs():
    """Directories Python looks for third-party packages in (this one's, the system's)."""
    found = set(filter(os.path.isdir, [sysconfig.get_paths()[k] for k in ("purelib", "platlib")]))
    home = os.path.realpath(sys.base_prefix)
    for pattern in ("/usr/lib/python3*/*-packages", "/usr/local/lib/python3*/*-packages",
                    os.path.join(home, "lib", "python3*", "*-packages")):
        found.update(glob.glob(pattern))
    import site
    found.update(p for p in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(p))
    return sorted(os.path.realpath(p) for p in found)


def third_party():
    """{site directory: [paths inside it]} of the packages this process has imported from
    outside the standard library and npformer (with the shared libraries wheels carry beside
    them): what the learner's process may need, and nothing else of those directories."""
    stdlib = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")}
    sites = [p for p in _site_dirs() if not any(p == s for s in stdlib)]
    kept = {}
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if "." in name or not where or name == "npformer" or name.startswith(("__editable__", "_distutils_hack")):
            continue
        where = os.path.realpath(where)
        path = os.path.dirname(where) if getattr(module, "__path__", None) else where
        for site_dir in sites:
            if path.startswith(site_dir + os.sep) and os.path.dirname(path) == site_dir:
                kept.setdefault(site_dir, set()).add(path)
    for site_dir in list(kept):
        kept[site_dir].update(glob.glob(os.path.join(site_dir, "*.libs")))
    return {site: sorted(paths) for site, paths in kept.items()}


def _system_binds():
    """Binds of the system's libraries: /usr, and the top folders that are links into it."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args + ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]


def view(build, workspace):
    """(bwrap arguments of the file system view, the learner's ``sys.path``)."""
    python_home = os.path.realpath(sys.base_prefix)
    args = _system_binds()
    if not python_home.startswith("/usr" + os.sep):
        args += ["--ro-bind", python_home, python_home]
    bound = ("/usr", python_home)
    packages = third_party()
    for site_dir in _site_dirs():                  # hidden, whatever they hold, npformer included
        if site_dir.startswith(bound) and os.path.isdir(site_dir):
            args += ["--tmpfs", site_dir]
    for site_dir, paths in packages.items():
        if not site_dir.startswith(bound):
            args += ["--dir", site_dir]
        for path in paths:
            args += ["--ro-bind", path, path]
    installed = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if installed.startswith(bound) and not any(installed.startswith(s + os.sep) for s in _site_dirs()):
        args += ["--tmpfs", installed]
    args += ["--ro-bind", build, BUILD_AT, "--ro-bind", workspace, SUBMISSION_AT]
    return args, [BUILD_AT] + list(packages)


def command(isolation, build, workspace, limits, seccomp_fd, program):
    """The ``bwrap`` command that runs ``program`` (a Python source text) in a sandbox seeing
    ``build`` and ``workspace``; ``seccomp_fd``: the filter's descriptor, or None."""
    binds, path = view(build, workspace)
    python = os.path.realpath(sys.executable)
    environment = {"HOME": SCRATCH_AT, "TMPDIR": SCRATCH_AT, "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8",
                   "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                   "NPFORMER_TRACK": "plain", "PATH": "/usr/bin"}
    args = [isolation.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
            "--die-with-parent", "--new-session", "--clearenv"]
    for name, value in environment.items():
        args += ["--setenv", name, value]
    args += binds + ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
                     "--size", str(int(limits.scratch)), "--tmpfs", SCRATCH_AT, "--remount-ro", "/",
                     "--chdir", SCRATCH_AT]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    boot = f"import sys; sys.path[:0] = {path!r}\n{program}"
    return args + ["--", python, "-I", "-S", "-c", boot]


def unwalled_command(build, site_dirs, program):
    """The same program without walls (no bubblewrap here): the build first on its path, then
    ``site_dirs`` (no site module, so that no installed npformer comes first)."""
    boot = f"import sys; sys.path[:0] = {[build] + list(site_dirs)!r}\n{program}"
    return [os.path.realpath(sys.executable), "-I", "-S", "-c", boot]


def unwalled_environment(scratch):
    """The few variables a learner's process gets where no sandbox clears the rest."""
    return {"HOME": scratch, "TMPDIR": scratch, "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8",
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "NPFORMER_TRACK": "plain",
            "PATH": os.environ.get("PATH", "/usr/bin")}


# -- inside: the process's own limits ------------------------------------------------------------
def _libc():
    """The C library (for prctl), or None where it cannot be loaded."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc if hasattr(libc, "prctl") else None
    except (OSError, AttributeError):
        return None


def private():
    """Make this process non-dumpable: another process of the same user (a learner's) can no
    longer trace it or read its memory. Linux only; True when it took effect."""
    libc = _libc()
    return libc is not None and libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


def dies_with_parent():
    """The function a child runs before its program (``preexec_fn``) so that it is killed
    when the process that started it dies (Linux; elsewhere it does nothing)."""
    libc = _libc()

    def apply():
        if libc is not None:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return apply


def tasks(uid=None):
    """How many processes and threads the user ``uid`` (default: ours) runs in this PID
    namespace, as RLIMIT_NPROC counts them; None where /proc cannot tell."""
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


def limiter(limits):
    """Set ``limits`` on this process (a learner's, just forked): address space, CPU seconds
    (SIGXCPU first, then SIGKILL), file size, open files, processes (what runs now plus
    ``limits.processes``), no core dumps."""
    import resource

    def cap(kind, value, spare=0):
        soft, hard = resource.getrlimit(kind)
        value = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
        top = value + spare if hard == resource.RLIM_INFINITY else min(value + spare, hard)
        resource.setrlimit(kind, (value, top))
    cap(resource.RLIMIT_AS, limits.memory)
    cap(resource.RLIMIT_CPU, max(1, int(limits.cpu)), spare=2)
    cap(resource.RLIMIT_FSIZE, limits.file_size)
    cap(resource.RLIMIT_NOFILE, limits.files)
    running = tasks()
    if running is not None:
        cap(resource.RLIMIT_NPROC, running + limits.processes)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


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
    """Kill every process of session ``sid`` (where no PID namespace does it for us)."""
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


# -- the judge's side ----------------------------------------------------------------------------
class CappedReader(threading.Thread):
    """Reads a pipe to its end, keeping the first ``cap`` bytes and counting the rest."""

    def __init__(self, stream, cap):
        super().__init__(daemon=True)
        self.stream, self.cap, self.kept, self.dropped = stream, cap, bytearray(), 0

    def run(self):
        try:
            while True:
                chunk = self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536)
                if not chunk:
                    return
                room = self.cap - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]
                self.dropped += max(0, len(chunk) - max(room, 0))
        except (OSError, ValueError):        # closed under it: the judge has moved on
            return
