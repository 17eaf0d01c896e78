"""``python -m npformer.cli ...`` is the ``npformer`` command."""
import sys

from . import program

sys.exit(program())
