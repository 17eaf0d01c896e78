"""``python -m npformer ...`` is the ``npformer`` command."""
import sys

from .cli import program

sys.exit(program())
