#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image (Ubuntu, as root).
# The autograder zip holds this file, run_autograder, course.json and npformer/ (the package).
set -euo pipefail
apt-get update -qq
apt-get install -y -qq python3 python3-pip > /dev/null
python3 -m pip install -q "numpy>=1.24" hypothesis
useradd --no-create-home --shell /usr/sbin/nologin student 2>/dev/null || true   # grading runs as it
