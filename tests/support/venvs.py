"""A fresh virtual environment for a test, that sees this one's packages (numpy, scipy ...:
nothing is downloaded) after its own, through a .pth file. This environment may itself be a venv,
which ``python -m venv --system-site-packages`` would pass over for the Python it was made from."""
import os
import site
import subprocess
import sys
import sysconfig
from pathlib import Path


def fresh_venv(folder):
    """(the venv's folder, its python) of a new venv in ``folder``/venv."""
    venv = Path(folder) / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    here = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    Path(own, "this-environment.pth").write_text("\n".join(sorted(here)) + "\n", encoding="utf-8")
    return venv, python
