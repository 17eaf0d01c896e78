"""The tests' own way of running a command as an unprivileged user (tests/support/as_user.py,
which the walls tests grade with): from a virtual environment the user cannot even reach, the
command runs as that user with the environment's Python and packages; and the user and the
folders made for it are gone once the process that made them has ended."""
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from support.as_user import can_switch_user
from support.venvs import fresh_venv

pytestmark = pytest.mark.skipif(not can_switch_user(),
                                reason="switching user needs root and useradd, userdel, unshare, setpriv, runuser")

TESTS = Path(__file__).resolve().parents[1]

# Run by the venv's Python: make the user and a folder, run a command as the user with this very
# Python, say what it saw and what was made.
SCRIPT = """
import json, sys
from support.as_user import give, run_as, shared_folder, student
user, folder = student(), shared_folder()
give(folder, user)
ran = run_as(user, [sys.executable, "-c", "import os, sys, numpy; print(os.getuid(), sys.prefix, numpy.__name__)"],
             cwd=folder, env={"PATH": "/usr/bin:/bin"}, timeout=120)
print(json.dumps({"user": user, "folder": folder, "code": ran.returncode, "out": ran.stdout, "err": ran.stderr}))
"""


def test_a_venv_the_user_cannot_reach_runs_as_the_user_and_nothing_is_left(tmp_path):
    # pytest's folder is root's alone: another user cannot enter the venv's folder, nor this Python's
    assert any(os.stat(folder).st_mode & 0o001 == 0 for folder in tmp_path.parents if str(folder) != "/")
    venv, python = fresh_venv(tmp_path)
    ran = subprocess.run([str(python), "-c", SCRIPT], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(TESTS)})
    assert ran.returncode == 0, ran.stderr[-3000:]
    said = json.loads(ran.stdout.strip().splitlines()[-1])
    assert said["code"] == 0, said["err"][-3000:]
    uid, prefix, module = said["out"].split()
    assert int(uid) != 0
    assert prefix == str(venv) and module == "numpy"
    with pytest.raises(KeyError):                    # the user made for that process is gone
        pwd.getpwnam(said["user"])
    assert not os.path.exists(said["folder"])
