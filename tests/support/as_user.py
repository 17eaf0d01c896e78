"""Running a command as an unprivileged user, from tests that run as root.

``student()`` makes a system user (no home, no login shell) for this test process and returns
its name. ``run_as(user, argv, ...)`` runs ``argv`` (``argv[0]``: this Python, a virtual
environment's included) as that user. The user may not reach this Python, its environment or
this checkout (pyenv keeps its Pythons under /root, mode 700); the command then runs in a mount
namespace of its own (``unshare``) where the folder that stops the user is covered by an empty
one and the paths it needs are bound back at the same places: the Python, its site-packages and
the ``pyvenv.cfg`` a virtual environment is found by all stay where they are, and nothing
changes on the machine itself.

Nothing is left behind: the user and every folder made here are removed when the process ends.
"""
import atexit
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile

NAME = "npformer-student"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = ("useradd", "userdel", "unshare", "setpriv", "runuser")


def can_switch_user():
    """True where a test may make a user and run as it: root, with the tools above."""
    return os.getuid() == 0 and all(shutil.which(tool) for tool in TOOLS)


def student():
    """The unprivileged user the tests run as: one per test process (pytest-xdist's workers
    each make their own, so that none removes a user another still runs as), made when first
    asked for and removed when the process ends."""
    name = f"{NAME}-{os.getpid()}"                      # at most 32 characters, as useradd asks
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                       check=True)
        atexit.register(_remove_user, name)
    return name


def _remove_user(name):
    subprocess.run(["userdel", "--force", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def shared_folder():
    """A new folder under /tmp every user can enter (not the test's own, which is root's alone),
    removed with everything in it when the process ends."""
    folder = tempfile.mkdtemp(prefix="npformer-as-user-", dir="/tmp")
    os.chmod(folder, 0o755)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def give(path, user):
    """Make ``path`` (a tree) the user's."""
    entry = pwd.getpwnam(user)
    for folder, dirs, files in os.walk(path):
        for name in [folder] + [os.path.join(folder, n) for n in dirs + files]:
            os.lchown(name, entry.pw_uid, entry.pw_gid)


def needed_paths():
    """The folders a copy of this Python started as another user must read: its environment
    (``sys.prefix``, holding ``pyvenv.cfg`` and site-packages), the Python it was made from
    (by its given and its real path), every folder on ``sys.path`` and this checkout."""
    paths = {sys.prefix, sys.base_prefix, os.path.realpath(sys.base_prefix),
             os.path.dirname(os.path.realpath(sys.executable)), ROOT}
    paths.update(os.path.abspath(p) for p in sys.path if p and os.path.isdir(p))
    paths = sorted(p for p in paths if os.path.isdir(p))
    # a folder inside another one on the list comes with it
    return [p for p in paths if not any(p.startswith(q.rstrip(os.sep) + os.sep) for q in paths)]


def blocking_folder(user, path):
    """The highest folder on the way to ``path`` (``path`` included) that ``user`` cannot
    enter, or None when the user reaches ``path``."""
    steps, folder = [], path
    while folder != os.path.dirname(folder):
        steps.append(folder)
        folder = os.path.dirname(folder)
    script = "".join(f'test -x {shlex.quote(p)} || {{ echo {shlex.quote(p)}; exit; }}; '
                     for p in reversed(steps))
    said = subprocess.run(["runuser", "-u", user, "--", "sh", "-c", script], capture_output=True, text=True)
    return said.stdout.strip() or None


def _walls_down(user, stash):
    """Shell lines that, in a private mount namespace, make every needed path reachable at its
    own place: each needed path under a folder the user cannot enter is first bound aside (in
    ``stash``), the folder is covered by an empty tmpfs the user may enter, and the path is
    bound back where it was."""
    blocked = {}
    for path in needed_paths():
        folder = blocking_folder(user, path)
        if folder == path:
            raise PermissionError(f"{user} cannot enter {path} itself, which this Python needs")
        if folder is not None:
            blocked.setdefault(folder, []).append(path)
    lines = []
    for number, (folder, paths) in enumerate(sorted(blocked.items())):
        aside = [os.path.join(stash, f"{number}-{i}") for i in range(len(paths))]
        lines += [f"mkdir {shlex.quote(a)} && mount --bind {shlex.quote(p)} {shlex.quote(a)}"
                  for p, a in zip(paths, aside)]
        lines.append(f"mount -t tmpfs -o mode=755 npformer-as-user {shlex.quote(folder)}")
        lines += [f"mkdir -p {shlex.quote(p)} && mount --bind {shlex.quote(a)} {shlex.quote(p)}"
                  for p, a in zip(paths, aside)]
    return lines


def run_as(user, argv, cwd, env, timeout):
    """``subprocess.run`` of ``argv`` as ``user`` (text output captured) with only ``env`` (and
    this checkout first on PYTHONPATH), where every path this Python needs is reachable at its
    own place."""
    entry = pwd.getpwnam(user)
    env = dict(env)
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                  if p and p != ROOT])
    stash = tempfile.mkdtemp(prefix="npformer-as-user-")
    try:
        script = _walls_down(user, stash)
        switch = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", "--"]
        command = ["env", "-i"] + [f"{k}={v}" for k, v in env.items()] + list(argv)
        script.append(f"cd {shlex.quote(str(cwd))} && exec {shlex.join(switch + command)}")
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", " && ".join(script)],
                              capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(stash, ignore_errors=True)           # mount points only, empty out here
