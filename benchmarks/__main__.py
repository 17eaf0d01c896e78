"""Entry point: ``python -m benchmarks [--quick] [--configs ...] [--threads N] [--no-growth]``."""
import sys

from benchmarks.run import main

sys.exit(main())
