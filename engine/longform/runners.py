"""Runners for the long-form pipeline: the local backend it wants, and batch sizing.

`transcribe_long` takes any `engine.types.Runner`; `long_form_backend` builds the local one laid
out for it, and `choose_batch_size` picks how many chunks one call gets.
"""

from __future__ import annotations

import os
from typing import Any

from engine.asr.budget import DECODE_MEMORY_MB
from engine.asr.ct2_decoder import Ct2Runner

# Decode streams on the CPU: model replicas of cores // 2 threads each, one batch each at a
# time (see `engine.longform.pipeline`). Measured on the 2-core test machine only; CUDA keeps one.
CPU_STREAMS = 2
# Items generated together on the CPU (a pass's generate() and align() run over slices of this
# many, at the pass's one width, so the text is the same): the decoder holds the cross-attention
# keys and values of every item of a call (~7 MB per 11 s chunk on tiny.en). Through the CLI
# (beam 5, two streams; bench/memory.py): 8 min mix, 705 -> 437 MB peak RSS with the text
# identical (with the per-wave trim and oneDNN cap, engine.native_memory); 20 min mix, whole
# calls 701-733 MB, slices of 8 593, of 4 523 (trimmed). CPU time per item did not grow in
# single-call tests (greedy 16 vs 2 x 8 vs 4 x 4 items: 16-20 s for three calls each). Calls
# with more hypotheses x frames than 4 short windows at beam 5 (the padded window at beam 5)
# take fewer items, and align() takes one (`engine.asr.ct2_batch.generate_slice`).
CPU_DECODE_SLICE = 4


def long_form_backend(model: Any = None, *, device: str = "auto",
                      compute_type: str = "auto",
                      decode_memory_mb: float | None = DECODE_MEMORY_MB) -> Ct2Runner:
    """The local runner (not loaded) as the long-form pipeline wants it: `CPU_STREAMS` decode
    streams on a CPU with that many cores, one stream on CUDA or a single core.

    A single decode call runs on one replica with its share of the cores: faster-whisper's own
    loop over short files took 1.2x as long that way on the 2-core test machine, so the CLI
    keeps an all-cores backend for those (`app.commands.transcribe.make_backends`).
    ``decode_memory_mb``: the streams' shared budget for decode buffers (`DECODE_MEMORY_MB`;
    None: unbounded).
    """
    streams = max(1, min(CPU_STREAMS, os.cpu_count() or 1))
    return Ct2Runner(model, device=device, compute_type=compute_type, streams=streams,
                     max_batch=CPU_DECODE_SLICE, decode_memory_mb=decode_memory_mb)


def choose_batch_size(device: str, cpu_count: int | None = None,
                      free_memory_bytes: int | None = None) -> int:
    """Chunks per decode call.

    CPU: the runner encodes items one by one and batches only the decoder, whose int8 steps
    are bound by reading the 20 MB vocabulary projection, so larger batches amortise it: on
    the 2-core test machine 8 -> 16 -> 32 took the 231 s reading from 5.0-5.4 s to 4.3-4.5 s
    to 4.1-4.3 s at the same WER (one stream). With two decode streams, each with a batch of
    its own, 16 measured best on the 20 min mix (8: 16-17 s, 16: 13-14 s, 24 or 32: 14-16 s).
    4 on a machine with little free memory. CUDA: large batches keep the GPU fed; 16 per
    ~4 GiB free, capped at 32.
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
