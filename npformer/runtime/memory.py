"""Keeping freed memory for reuse: fewer page faults per training step.

glibc returns large freed arrays to the operating system (they are mapped with mmap above
a size threshold, and the heap is trimmed), so every training step faults the pages of its
fresh arrays in again: about a millisecond per 4 MB here, as much as the arithmetic on
them. ``keep_freed_memory()`` raises both thresholds so freed blocks are reused instead.
It is a setting of the whole process, so npformer never calls it on import: the trainer
and the benchmarks do.
"""
from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024        # glibc's ceiling on 64-bit systems


def keep_freed_memory(trim_threshold=1 << 30):
    """Ask glibc to keep freed memory (blocks up to 32 MiB, heap up to ``trim_threshold``
    bytes) for reuse. Returns True if the C library took both settings, False where it has
    no ``mallopt`` (not glibc)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and \
        bool(mallopt(M_TRIM_THRESHOLD, int(trim_threshold)))
