"""Running a command as an unprivileged user, from tests that run as root.

``student()`` makes (once) a system user with no home and no login shell and returns its name.
``run_as(user, argv, ...)`` runs ``argv`` (``argv[0]`` is this Python) as that user. That user
may not reach this Python (pyenv keeps it under /root, mode 700) or this checkout; the command
then runs in a mount namespace of its own (``unshare``), where both are bound at paths it can
reach: nothing changes on the machine itself.
"""
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile

NAME = "npformer-student"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def can_switch_user():
    """True where a test may make a user and run as it: root, with useradd, unshare and setpriv."""
    return os.getuid() == 0 and all(shutil.which(tool) for tool in ("useradd", "unshare", "setpriv", "runuser"))


def student():
    """The unprivileged user the tests run as (made when missing)."""
    try:
        pwd.getpwnam(NAME)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", NAME],
                       check=True)
    return NAME


def _reaches(user, path):
    return subprocess.run(["runuser", "-u", user, "--", "test", "-r", path]).returncode == 0


def shared_folder():
    """A new folder under /tmp every user can enter (not the test's own, which is root's alone)."""
    folder = tempfile.mkdtemp(prefix="npformer-as-user-", dir="/tmp")
    os.chmod(folder, 0o755)
    return folder


def give(path, user):
    """Make ``path`` (a tree) the user's."""
    entry = pwd.getpwnam(user)
    for folder, dirs, files in os.walk(path):
        for name in [folder] + [os.path.join(folder, n) for n in dirs + files]:
            os.lchown(name, entry.pw_uid, entry.pw_gid)


def run_as(user, argv, cwd, env, timeout):
    """``subprocess.run`` of ``argv`` as ``user`` (text output captured), this Python and this
    checkout bound where the user reaches them when it does not reach them where they are."""
    entry = pwd.getpwnam(user)
    python = os.path.realpath(sys.executable)
    home = os.path.realpath(sys.base_prefix)
    binds, env = [], dict(env)
    if not _reaches(user, python):
        mount = shared_folder()
        binds.append((home, os.path.join(mount, "python")))
        python = os.path.join(mount, "python", os.path.relpath(python, home))
        env["LD_LIBRARY_PATH"] = os.path.join(mount, "python", "lib")
    if not _reaches(user, os.path.join(ROOT, "npformer", "__init__.py")):
        mount = shared_folder()
        binds.append((ROOT, os.path.join(mount, "source")))
        env["PYTHONPATH"] = os.path.join(mount, "source")
    else:
        env["PYTHONPATH"] = ROOT
    script = [f"mkdir -p {shlex.quote(target)} && mount --bind {shlex.quote(source)} {shlex.quote(target)}"
              for source, target in binds]
    switch = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", "--"]
    command = shlex.join(["env", "-i"] + [f"{k}={v}" for k, v in env.items()] + [python] + list(argv[1:]))
    script.append(f"cd {shlex.quote(str(cwd))} && exec {shlex.join(switch)} {command}")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", " && ".join(script)],
                          capture_output=True, text=True, timeout=timeout)
