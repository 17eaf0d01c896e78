"""``python -m npformer.cli ...`` is the ``npformer`` command."""
import sys

from npformer.cli import main

sys.exit(main())
