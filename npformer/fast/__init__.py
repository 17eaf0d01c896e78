"""The fast track: drop-in twins of the plain functions marked ``@fast_twin``.

Each module here mirrors a component file of the plain track and holds functions of
the same names and signatures, registered with ``@twin_of(plain)``. They compute the
same numbers with speed idioms the plain files leave out: in-place and ``out=`` kernels,
grouped GEMMs, reused buffers, blockwise tiling. ``npformer.core.track`` chooses which one
runs; ``tests/test_tracks.py`` holds every pair equal.
"""
from . import attention, ffn, flash_attention, functional, linear, loss, norm, optim, rope  # noqa: F401
from .parallel import available_cores, cores, on_cores, use_cores  # noqa: F401
