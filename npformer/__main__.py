"""``python -m npformer ...`` is the ``npformer`` command."""
import sys

from .cli import main

sys.exit(main())
