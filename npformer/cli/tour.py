"""``npformer tour``: the tutorial's tiny decoder, one stage at a time (npformer/tour.py)."""
from __future__ import annotations

from ..tour import tour
from .common import UsageError, positive_int, seed

WIDTH = 8                   # the tutorial's d


def add_arguments(parser):
    """Options of ``npformer tour``."""
    parser.add_argument("--heads", type=positive_int, default=2,
                        help=f"attention heads, a divisor of the width {WIDTH} (default 2)")
    parser.add_argument("--no-mask", action="store_true", help="remove the causal mask")
    parser.add_argument("--seed", type=seed, default=7, help="seed of the weights, >= 0 (default 7)")


def run(args):
    """Run ``npformer tour``; exit code."""
    if WIDTH % args.heads:
        raise UsageError(f"--heads: width {WIDTH} must be divisible by the number of heads, "
                         f"got {args.heads}")
    tour(args.heads, not args.no_mask, args.seed)
    return 0
