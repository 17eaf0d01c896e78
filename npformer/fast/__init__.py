"""The fast track: drop-in twins of the plain functions marked ``@fast_twin``.

Each module here mirrors a component file of the plain track and holds functions of
the same names and signatures, registered with ``@twin_of(plain)``. They compute the
same numbers with speed idioms the plain files leave out: in-place and ``out=`` kernels,
grouped GEMMs, reused buffers, blockwise tiling, row blocks on several cores
(``parallel``: on every available core when BLAS runs one thread per call, none of its own
while BLAS has threads; npformer never changes BLAS's threads). ``npformer.core.track``
chooses which one runs; ``tests/fast/test_tracks.py`` and ``tests/fast/test_twin_differential.py``
hold every pair equal on every input the plain function accepts.
"""
from . import attention, embedding, ffn, flash_attention, functional, linear, loss, norm, optim, rope  # noqa: F401
from .parallel import available_cores, cores, on_cores, use_cores  # noqa: F401
