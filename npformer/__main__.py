"""``python -m npformer ...`` is the ``npformer`` command."""
import sys

from npformer.cli import main

sys.exit(main())
