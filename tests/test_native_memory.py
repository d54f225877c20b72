"""engine.native_memory: freed C-heap pages go back to the system when the heap keeps them."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

import pytest

from engine import native_memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")

MiB = 1 << 20


def kept_by_the_heap(total: int) -> tuple[ctypes.CDLL, int]:
    """Allocate ``total`` bytes in 64 KiB blocks (below glibc's mmap threshold: from the heap),
    touch them, and free all but the last one, which pins the heap's top: glibc keeps the
    freed pages resident, as it does with a decode's buffers. Returns libc and the pinned
    block (free it when done)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    block = 64 * 1024
    pointers = [libc.malloc(block) for _ in range(total // block)]
    for pointer in pointers:
        ctypes.memset(pointer, 1, block)
    last = pointers.pop()
    for pointer in pointers:
        libc.free(pointer)
    return libc, last


def test_release_if_grown_trims_only_after_the_step() -> None:
    native_memory.release_free_memory()  # the floor: now
    before = native_memory.resident_bytes()
    assert before is not None
    assert not native_memory.release_if_grown(step=64 * MiB)  # nothing grew
    libc, last = kept_by_the_heap(96 * MiB)
    grown = native_memory.resident_bytes()
    assert grown is not None and grown - before >= 80 * MiB  # freed, yet still resident
    assert not native_memory.release_if_grown(step=256 * MiB)  # under the step: left alone
    assert native_memory.release_if_grown(step=64 * MiB)
    after = native_memory.resident_bytes()
    assert after is not None and after - before < 16 * MiB
    assert not native_memory.release_if_grown(step=64 * MiB)  # the new floor: nothing to do
    libc.free(last)


def test_generate_slices_hold_no_more_than_short_windows_at_beam_5() -> None:
    from engine.asr.ct2_batch import generate_slice

    assert generate_slice(None, 5, 1500) is None  # no limit asked (CUDA)
    assert generate_slice(4, 5, 600) == 4  # a short window at beam 5: as sized
    assert generate_slice(4, 5, 700) == 4
    assert generate_slice(4, 1, 1500) == 4  # greedy on the padded window: still fits
    assert generate_slice(4, 5, 1500) == 1  # beam 5 (or best-of 5) on 30 s: one at a time
    assert generate_slice(8, 5, 1500) == 3
    assert generate_slice(1, 5, 1500) == 1
