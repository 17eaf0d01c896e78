"""``python -m npformer.cli ...`` is the ``npformer`` command."""
import sys

from . import main

sys.exit(main())
