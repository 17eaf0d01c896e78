"""Entry point: ``python -m benchmarks [--quick] [--configs ...] [--repeats N]``."""
import sys

from benchmarks.run import main

sys.exit(main())
