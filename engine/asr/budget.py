"""A byte budget for the decode buffers in flight on a runner's decode streams.

A generate() call holds the cross-attention keys and values of every hypothesis it decodes
(beam or best-of) over every encoder frame, an align() call its attention over the frames, and
an encode() call its self-attention over the frames (the largest of the three for one item of
a long chunk);
two streams at their largest calls at the same moment made the peaks of long files, about
twice a short file's (issue 28; docs/evidence.md). The budget is what is left of the process's
target once what it holds as loaded is counted (`decode_budget_mb`): MKL's and oneDNN's code,
tables and buffers differ by hundreds of MB between processors, and a fixed byte budget for the
buffers alone held on one and not on another (issue 45). Each such call
takes its estimated bytes from a `ByteBudget` shared by the runner's streams before it starts
and gives them back when it ends: when the other stream holds too much, it waits for it. The
bound is by design, whatever the file, the beam or the batch: what the decode calls hold at
once is at most the budget (one call larger than the whole budget runs alone).

The estimates (`generate_bytes`, `align_bytes`) count the float32 buffers that grow with the
work: keys and values are 2 x decoder layers x d_model x 4 bytes per hypothesis and encoder
frame (7 MB for an 11 s chunk's 550 frames on tiny.en, as measured); an alignment ~180 x
d_model bytes per frame (35 MB for a 10 s item on tiny.en, as measured).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

MB = 1 << 20
# The default budget of the decode calls in flight on all streams of a runner (the local
# long-form backend's, and each cluster actor's): a file's peak RSS is the process's base
# (model, VAD, an audio section) plus at most this (docs/evidence.md).
DECODE_MEMORY_MB = 128.0
# A long file's peak resident size, all told, with the default model and settings (issue 45).
MEMORY_TARGET_MB = 500.0
# What a long-file run holds beyond the process as the model loaded (weights, the BLAS
# library's code and tables, measured at load) and beyond the decode calls' buffers: the
# section's audio, each stream's encoder activations and kernel scratch, the VAD sessions and
# what the C heap keeps between trims; the largest measured over dense speech on both kernel
# sets (docs/evidence.md).
RUN_RESERVE_MB = 230.0
MIN_DECODE_MEMORY_MB = 24.0  # one greedy 4-item slice of 30 s windows on tiny.en
# Decoder layers of Whisper's sizes by width (d_model); a width not listed counts as the
# largest one below it (over-estimating a turbo model's 4 decoder layers keeps the bound).
DECODER_LAYERS = {384: 4, 512: 6, 768: 12, 1024: 24, 1280: 32}
ALIGN_BYTES_PER_FRAME_AND_WIDTH = 180


def decode_budget_mb(loaded_mb: float | None, asked_mb: float = DECODE_MEMORY_MB,
                     target_mb: float = MEMORY_TARGET_MB,
                     reserve_mb: float = RUN_RESERVE_MB) -> float:
    """The decode calls' budget for a process that held ``loaded_mb`` once its model loaded:
    ``asked_mb`` at most, less when the target leaves less room beside the loaded process and
    the run's reserve, never under `MIN_DECODE_MEMORY_MB` (None: not measured, as asked)."""
    if loaded_mb is None:
        return asked_mb
    return max(MIN_DECODE_MEMORY_MB, min(asked_mb, target_mb - loaded_mb - reserve_mb))


def decoder_layers(width: int) -> int:
    fitting = [w for w in DECODER_LAYERS if w <= width]
    return DECODER_LAYERS[max(fitting)] if fitting else DECODER_LAYERS[min(DECODER_LAYERS)]


def generate_bytes(items: int, hypotheses: int, frames: int, width: int) -> int:
    """Keys and values a generate() call holds: ``items`` x ``hypotheses`` over ``frames``
    encoder frames of a ``width``-wide model."""
    return items * hypotheses * frames * 2 * decoder_layers(width) * width * 4


def encode_bytes(frames: int, width: int) -> int:
    """What an encode() call of one item over ``frames`` encoder positions holds: the attention
    scores of each of its ``width / 64`` heads over frames x frames, and their softmax (69 MB
    for a 24 s chunk's 1200 positions on tiny.en; 65-80 MB measured for a 30 s window)."""
    return 2 * max(1, width // 64) * frames * frames * 4


def align_bytes(items: int, frames: int, width: int) -> int:
    """What an align() call of ``items`` over ``frames`` encoder frames holds."""
    return items * frames * ALIGN_BYTES_PER_FRAME_AND_WIDTH * width


class ByteBudget:
    """At most ``limit`` bytes held at once by the calls of every thread that shares it.

    ``peak`` is the most ever held at once (for tests and benches)."""

    def __init__(self, limit: int) -> None:
        if limit < MB:
            raise ValueError("a decode memory budget below 1 MB cannot hold any call")
        self.limit = limit
        self.in_use = 0
        self.peak = 0
        self.waits = 0
        self._cond = threading.Condition()

    @contextmanager
    def hold(self, nbytes: int) -> Iterator[None]:
        """Hold ``nbytes`` (at most the whole budget) for the ``with`` block, waiting until
        the other holders leave enough. A thread holds one call's bytes at a time, so waits
        cannot deadlock."""
        nbytes = max(0, min(nbytes, self.limit))
        with self._cond:
            if self.in_use + nbytes > self.limit:
                self.waits += 1
                self._cond.wait_for(lambda: self.in_use + nbytes <= self.limit)
            self.in_use += nbytes
            self.peak = max(self.peak, self.in_use)
        try:
            yield
        finally:
            with self._cond:
                self.in_use -= nbytes
                self._cond.notify_all()
