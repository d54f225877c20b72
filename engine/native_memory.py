"""Freed native memory handed back to the system between waves of work.

CTranslate2 allocates its activations with the C library's malloc on the CPU. glibc keeps
what is freed in the arena of the thread that freed it (one per decode stream, the VAD pool
and PyAV) and raises its mmap threshold after the first large free, so later large buffers
come from the arenas too. A decode wave's buffers (the decoder's cross-attention keys and
values: batch x frames x 2 x layers x width floats, about 7 MB per 11 s chunk on tiny.en) are
then freed into arenas that never shrink: on a 3-hour file RSS climbed from 0.6 to 1.2 GB
wave after wave while live memory stayed flat (bench/memory.py). `malloc_trim(0)` returns the
free pages of every arena; called once per wave it costs a few milliseconds against seconds of
decoding. Elsewhere than glibc it is a no-op.

The other part that grew with the file's length is oneDNN's primitive cache (CTranslate2's
GEMM backend on this AMD CPU: "GEMM_S8 backend: DNNL" with ``CT2_VERBOSE=1``). Every new
matrix shape gets a primitive with its JIT-compiled kernel, kept up to 1024 of them; the
encoder runs each chunk at its own width, so a long file fills the cache with shapes it will
not see again. `limit_native_caches` caps it at 32 before the model loads (an environment
variable oneDNN reads when it first creates a primitive; a value the user set is kept): on the
20 min mix, peak RSS 523 -> 469 MB and 370 -> 267 MB at the end, CPU time 67.7 vs 67.3 s.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
from typing import Any

log = logging.getLogger(__name__)

PRIMITIVE_CACHE_CAPACITY = 32

_libc: Any = None
_looked = False


def release_free_memory() -> bool:
    """Return the C heap's free pages to the system (glibc); False where that is not possible."""
    global _libc, _looked
    if not _looked:
        _looked = True
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                libc.malloc_trim.argtypes = [ctypes.c_size_t]
                libc.malloc_trim.restype = ctypes.c_int
                _libc = libc
            except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
                log.debug("malloc_trim unavailable: freed memory stays with the allocator")
    if _libc is None:
        return False
    _libc.malloc_trim(0)
    return True


def limit_native_caches() -> None:
    """Cap oneDNN's primitive cache (see the module notes) unless the environment sets it."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(PRIMITIVE_CACHE_CAPACITY))
