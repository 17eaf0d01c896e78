#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image (Ubuntu, as root).
# The autograder zip holds this file, run_autograder, course.json and npformer/ (the package).
# The packages go into a venv of their own: Debian 12 and Ubuntu 24.04 refuse `pip install`
# into the system's Python (PEP 668, "externally-managed-environment").
set -euo pipefail
VENV=${NPFORMER_VENV:-/opt/npformer-venv}
apt-get update -qq
apt-get install -y -qq python3 python3-venv bubblewrap > /dev/null   # bubblewrap: the grader's walls
/usr/bin/python3 -m venv "$VENV"            # the Python apt installed, not one on root's PATH
"$VENV/bin/python" -m pip install -q "numpy>=1.24" "scipy>=1.10" tqdm threadpoolctl "hypothesis>=6" "pyseccomp>=0.1.2; sys_platform == 'linux'"
chmod -R a+rX "$VENV"                       # the student user runs it (root's umask may be 077)
useradd --no-create-home --shell /usr/sbin/nologin student 2>/dev/null || true   # grading runs as it
