"""Batch sizing for the long-form pipeline: how many chunks one decode call gets.

The pipeline takes any `engine.types.Runner`; `engine.asr.local_runner(..., files=True)` builds
the local one laid out for it.
"""

from __future__ import annotations

import os


def choose_batch_size(device: str, cpu_count: int | None = None,
                      free_memory_bytes: int | None = None) -> int:
    """Chunks per decode call.

    CPU: the runner encodes items one by one and batches only the decoder, whose int8 steps
    are bound by reading the 20 MB vocabulary projection, so larger batches amortise it; with
    two decode streams, each with a batch of its own, 16 per stream is the fastest (larger
    batches were slower; figures: docs/evidence.md). 4 on a machine with little free memory. CUDA: large batches keep the GPU fed; 16 per ~4 GiB free, capped at
    32.
    """
    if device == "cuda":
        if free_memory_bytes is None:
            return 16
        return max(1, min(32, 16 * int(free_memory_bytes // (4 << 30)) or 4))
    cores = cpu_count or os.cpu_count() or 1
    if free_memory_bytes is not None and free_memory_bytes < (1 << 30):
        return 4
    return 16 if cores <= 8 else 32


def free_memory_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None
