"""Freed native memory handed back to the system between waves of work.

CTranslate2 allocates its activations with the C library's malloc on the CPU. glibc keeps
what is freed in the arena of the thread that freed it (one per decode stream, the VAD pool
and PyAV) and raises its mmap threshold after the first large free, so later large buffers
come from the arenas too. A decode wave's buffers (the decoder's cross-attention keys and
values: batch x frames x 2 x layers x width floats, about 7 MB per 11 s chunk on tiny.en) are
then freed into arenas that never shrink, so a long file's RSS climbs wave after wave while
live memory stays flat (figures: docs/evidence.md). `malloc_trim(0)` returns the
free pages of every arena; called once per wave it costs a few milliseconds against seconds of
decoding. Elsewhere than glibc it is a no-op.

The other part that grew with the file's length is oneDNN's primitive cache (CTranslate2's
GEMM backend where it runs on oneDNN, as on an AVX2 AMD CPU: "GEMM_S8 backend: DNNL" with
``CT2_VERBOSE=1``). Every new matrix shape gets a primitive with its JIT-compiled kernel, kept
up to 1024 of them; the encoder runs each chunk at its own width, so a long file fills the
cache with shapes it will not see again. `limit_native_caches` caps it at 32 before the model loads (an environment
variable oneDNN reads when it first creates a primitive; a value the user set is kept), which
lowers the peak and the end RSS at no CPU cost. Where CTranslate2 runs on MKL (an Intel CPU)
it allocates through ``mkl_malloc``, whose pool keeps freed buffers for reuse where no trim
reaches them; ``MKL_DISABLE_FAST_MM=1`` (read when MKL first allocates) hands them to malloc,
so the trims below cover them too.

A trim per wave still left the peak *inside* a wave: a wave is many CTranslate2 calls (an
encode per chunk, a generate and an align per slice, on two streams at once), each freeing its
buffers into its thread's arena, where the next call, of another width, often cannot reuse
them. `release_if_grown` is the
guard for that: called after each such call, it reads the resident size (one small read of
/proc/self/statm) and trims only when it has grown by `TRIM_STEP` since the last trim, so
what the heap may keep that nobody uses stays under that step, and trims happen only as often
as memory is actually retained (a trim takes milliseconds, and the pages it returns fault in
again, so a trim after every call costs noticeably more CPU). With one-item alignments and
generate slices bounded by hypotheses x frames (`engine.asr.ct2_batch`), it keeps a long
file's peak well below what it was without it (figures: docs/evidence.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
import threading
from typing import Any

log = logging.getLogger(__name__)

PRIMITIVE_CACHE_CAPACITY = 32
TRIM_STEP = 32 << 20  # bytes of growth in resident size since the last trim that trigger one

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
    after = resident_bytes()
    if after is not None:
        _guard.floor = after
    return True


class _Guard:
    """The resident size after the last trim (the floor), shared by every thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.floor = 0
        self.page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self.readable = sys.platform.startswith("linux")


_guard = _Guard()


def resident_bytes() -> int | None:
    """This process's resident set size now (Linux; None elsewhere)."""
    if not _guard.readable:
        return None
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _guard.page
    except (OSError, ValueError, IndexError):
        _guard.readable = False
        return None


def release_if_grown(step: int = TRIM_STEP) -> bool:
    """Trim (`release_free_memory`) when the resident size has grown by ``step`` bytes since
    the last trim; True when it trimmed. Cheap when it does not: call it after each native
    call that frees large buffers (see the module notes)."""
    rss = resident_bytes()
    if rss is None:
        return False
    with _guard.lock:
        if rss < _guard.floor:
            _guard.floor = rss  # memory went back by itself: grow from here
        if rss - _guard.floor < step:
            return False
        trimmed = release_free_memory()
        _guard.floor = resident_bytes() or 0
        return trimmed


def limit_native_caches() -> None:
    """Cap oneDNN's primitive cache and turn MKL's buffer pool off (see the module notes)
    unless the environment sets them."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(PRIMITIVE_CACHE_CAPACITY))
    os.environ.setdefault("MKL_DISABLE_FAST_MM", "1")
