"""The walls around a learner's code, as the kernel keeps them: bubblewrap's command line.

A submission's sandbox (``command``): new user, PID, network, IPC, UTS and mount namespaces, no
capabilities, a new session, no further user namespaces, a seccomp filter refusing the kernel's
rarely needed doors (``DENIED``), a read-only view of Python, the packages npformer imports, the
hand-out build and a copy of the submission's files, a few fixed environment variables. Its pid 1
is the zygote (``--as-pid-1``): no process of bubblewrap's own is inside. Graded as root,
bubblewrap runs as ``UNPRIVILEGED`` (nobody), what nobody cannot reach bound first where it can
(``launcher``: util-linux's unshare, mount and setpriv). ``detect()`` says what this machine can
enforce; inside, each learner's process sets its own limits (``limiter``) and a second filter
(``no_new_processes``) before it loads the learner's files.
"""
from __future__ import annotations

import errno
import functools
import glob
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass

GIB, MIB = 1 << 30, 1 << 20
TIMEOUT = 120.0                  # seconds of its own computing one exercise may take (``--timeout``)
BUILD_AT, SUBMISSION_AT = "/grading", "/submission"   # where the sandbox sees them
UNPRIVILEGED = 65534             # nobody: the uid and gid a root grader's sandboxes run as
FILE_SIZE = 64 * MIB             # bytes of one file a learner's process writes, where it can write
NAMESPACES = "user, pid, net, ipc, uts, mount namespaces"
# what the code inside may not do even in its namespaces (refused with EPERM)
DENIED = ("socket", "socketpair", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
          "pidfd_open", "pidfd_send_signal",
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
INSIDE = {"HOME": "/", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1",
          "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
          "NPFORMER_TRACK": "plain", "PATH": "/usr/bin"}
OUTSIDE = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}     # bubblewrap's own


@dataclass(frozen=True)
class Limits:
    """The limits of one learner's process: ``memory`` bytes of address space, ``cpu`` and
    ``wall`` seconds, ``output`` bytes kept of what it prints, ``files`` open at once,
    ``processes`` (threads: it may start no process) beside those its user already runs."""

    memory: int = 4 * GIB
    cpu: float = 300.0
    wall: float = TIMEOUT
    output: int = 256 * 1024
    files: int = 256
    processes: int = 32

    def __post_init__(self):
        for name in ("memory", "cpu", "wall", "output", "files", "processes"):
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
        runs_as = ", as nobody" if os.geteuid() == 0 else ""
        return f"isolation: bubblewrap ({NAMESPACES}{runs_as}), {filtered}"


def seccomp_module():
    """pyseccomp, once it has shown it can build a filter here; else None."""
    try:
        import pyseccomp
        pyseccomp.SyscallFilter(pyseccomp.ALLOW)
        return pyseccomp
    except (ImportError, OSError, RuntimeError, AttributeError):
        return None


@functools.lru_cache(maxsize=None)
def detect():
    """The ``Isolation`` this machine offers (probed once per process, as the sandboxes start)."""
    seccomp = seccomp_module() is not None
    if not sys.platform.startswith("linux"):
        return Isolation(None, False, f"bubblewrap needs Linux, this is {sys.platform}")
    found = shutil.which("bwrap")
    if found is None:
        return Isolation(None, seccomp, "bubblewrap is not installed: apt install bubblewrap")
    if os.geteuid() == 0 and not all(shutil.which(tool) for tool in ("unshare", "mount", "setpriv")):
        return Isolation(None, seccomp, "graded as root, util-linux's unshare, mount and setpriv are needed")
    python = os.path.realpath(sys.executable)
    probe = subprocess.run(launcher(_bwrap(found) + _python_view() + ["--", python, "-I", "-S", "-c", ""]),
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, env=OUTSIDE)
    if probe.returncode != 0:
        said = (probe.stderr.strip().splitlines() or ["no message"])[-1][:200]
        return Isolation(None, seccomp, f"bubblewrap cannot make namespaces here: {said}")
    return Isolation(found, seccomp)


def no_new_processes():
    """In a learner's process (once forked): from now on it cannot start a process or run a
    program; threads it may still start (``clone`` with CLONE_THREAD; ``clone3`` says it is not
    there, and the C library falls back to ``clone``). False where no filter can be built."""
    seccomp = seccomp_module()
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
    seccomp = seccomp_module()
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


def _python_view():
    """bwrap arguments of the system's libraries and this Python: /usr, the top folders that
    are links into it, Python's home."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    python_home = os.path.realpath(sys.base_prefix)
    if not python_home.startswith("/usr" + os.sep):
        args += ["--ro-bind", python_home, python_home]
    return args + ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]


def view(build, submission):
    """(bwrap arguments of the file system view, the learner's ``sys.path``)."""
    args = _python_view()
    bound = ("/usr", os.path.realpath(sys.base_prefix))
    packages = third_party()
    for site_dir in _site_dirs():                  # hidden, whatever they hold, npformer included
        if site_dir.startswith(bound) and os.path.isdir(site_dir):
            args += ["--tmpfs", site_dir]
    for site_dir, paths in packages.items():
        if not site_dir.startswith(bound):
            args += ["--dir", site_dir]
        for path in paths:
            args += ["--ro-bind", path, path]
    installed = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if installed.startswith(bound) and not any(installed.startswith(s + os.sep) for s in _site_dirs()):
        args += ["--tmpfs", installed]
    args += ["--ro-bind", build, BUILD_AT, "--ro-bind", submission, SUBMISSION_AT]
    return args, [BUILD_AT] + list(packages)


def _bwrap(executable):
    """The namespaces and privileges part of a bwrap command."""
    return [executable, "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
            "--as-pid-1", "--die-with-parent", "--new-session", "--clearenv"]


def command(isolation, build, submission, seccomp_fd, program):
    """The command that runs ``program`` (a Python source text) in a sandbox seeing ``build``
    and ``submission``; ``seccomp_fd``: the filter's descriptor, or None."""
    binds, path = view(build, submission)
    args = _bwrap(isolation.bwrap)
    for name, value in INSIDE.items():
        args += ["--setenv", name, value]
    args += binds + ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev", "--remount-ro", "/",
                     "--chdir", "/"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    boot = f"import sys; sys.path[:0] = {path!r}\n{program}"
    return launcher(args + ["--", os.path.realpath(sys.executable), "-I", "-S", "-c", boot])


# -- graded as root: bubblewrap as nobody --------------------------------------------------------
STAGE = """uid=$1 n=$2; shift 2
while [ "$n" -gt 0 ]; do mount --bind -o ro "$1" "$2" || exit 125; shift 2; n=$((n - 1)); done
exec setpriv --reuid="$uid" --regid="$uid" --clear-groups --inh-caps=-all -- "$@"
"""


def _reachable(path):
    """True when a user with no rights of its own may enter every folder on ``path``'s way."""
    folder = os.path.dirname(os.path.realpath(path))
    while True:
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return False
        if folder == os.sep:
            return True
        folder = os.path.dirname(folder)


_STAGE = {}


def staging_folder():
    """A folder every user may enter, where the sources nobody cannot reach are mounted (in the
    launcher's own mount namespace only; the host sees empty folders, removed at exit)."""
    if "path" not in _STAGE:
        import atexit
        root = tempfile.mkdtemp(prefix="npformer-stage-")
        os.chmod(root, 0o755)
        owner = os.getpid()
        atexit.register(lambda: os.getpid() == owner and shutil.rmtree(root, ignore_errors=True))
        _STAGE["path"] = root
    return _STAGE["path"]


def launcher(argv):
    """``argv`` (a bwrap command) as it is started: unchanged for an ordinary user; for root, as
    ``UNPRIVILEGED``, each ``--ro-bind`` source it cannot reach first mounted where it can."""
    if os.geteuid() != 0:
        return argv
    argv, pairs = list(argv), []
    for i, word in enumerate(argv[:-1]):
        if word in ("--ro-bind", "--ro-bind-try") and os.path.exists(argv[i + 1]) and not _reachable(argv[i + 1]):
            staged = os.path.join(staging_folder(), str(len(pairs)))
            if os.path.isdir(argv[i + 1]):              # a mount point of the source's kind
                os.makedirs(staged, mode=0o755, exist_ok=True)
            else:
                open(staged, "a").close()
            pairs += [argv[i + 1], staged]
            argv[i + 1] = staged
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", STAGE, "sh",
            str(UNPRIVILEGED), str(len(pairs) // 2)] + pairs + argv


# -- inside: a process's own protections ---------------------------------------------------------
PR_SET_DUMPABLE = 4                               # prctl(2)


def private():
    """Make this process non-dumpable: another process of the same user can no longer trace
    it or read its memory. Linux only; True when it took effect."""
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):                # no C library to ask, or no prctl in it
        return False


def tasks(uid=None):
    """How many processes and threads the user ``uid`` (default: ours) runs, as RLIMIT_NPROC
    counts them, as far as /proc shows; None where /proc cannot tell."""
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
    (SIGXCPU first, then SIGKILL), open files, processes (what runs now plus
    ``limits.processes``), ``FILE_SIZE`` per file written (without walls: inside, nothing is
    writable), no core dumps."""
    import resource

    def cap(kind, value, spare=0):
        soft, hard = resource.getrlimit(kind)
        value = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
        top = value + spare if hard == resource.RLIM_INFINITY else min(value + spare, hard)
        resource.setrlimit(kind, (value, top))
    cap(resource.RLIMIT_AS, limits.memory)
    cap(resource.RLIMIT_CPU, max(1, int(limits.cpu)), spare=2)
    cap(resource.RLIMIT_NOFILE, limits.files)
    cap(resource.RLIMIT_FSIZE, FILE_SIZE)
    running = tasks()
    if running is not None:
        cap(resource.RLIMIT_NPROC, running + limits.processes)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
