"""ASR backends, each an `engine.types.Runner` (``decode_batch(requests) -> transcripts``):

- `engine.asr.ct2_decoder.Ct2Runner`: guarded short-context chunk batches on CTranslate2 (the
  default for live text, the server and long files);
- `engine.asr.sequential.SequentialRunner`: faster-whisper's own 30 s loop (short files, the
  live engine's ``--padded`` mode);
- `engine.asr.tensorrt.TensorRTLLMRunner`: TensorRT-LLM Whisper engines on NVIDIA GPUs;
- `engine.asr.fake.ScriptedRunner`: scripted text, for tests of the layers above.

The two faster-whisper runners may share one loaded `engine.asr.whisper_model.FasterWhisperModel`.
Backend modules import their libraries lazily, so importing this package is cheap.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from engine.asr.budget import DECODE_MEMORY_MB

if TYPE_CHECKING:
    from engine.asr.ct2_decoder import Ct2Runner
    from engine.asr.sequential import SequentialRunner

# Decode streams on the CPU for files (the long-form pipeline: `sottovoce transcribe`, File >
# Open file): model replicas of cores // 2 threads each, one batch each at a time (see
# `engine.longform.pipeline`). Chosen on a 2-core CPU (docs/evidence.md); CUDA keeps one.
CPU_STREAMS = 2
# Items generated together on the CPU for files (a pass's generate() and align() run over slices
# of this many, at the pass's one width, so the text is the same): the decoder holds the
# cross-attention keys and values of every item of a call (~7 MB per 11 s chunk on tiny.en),
# so slices bound the peak RSS, with the same text and no more CPU time per item (figures:
# docs/evidence.md). Calls
# with more hypotheses x frames than 4 short windows at beam 5 (the padded window at beam 5)
# take fewer items, and align() takes one (`engine.asr.ct2_batch.generate_slice`).
CPU_DECODE_SLICE = 4


def local_runner(model: str | None = None, device: str = "auto", *, files: bool = False,
                 fast: bool = True, compute_type: str = "auto", streams: int = 1,
                 cpu_threads: int = 0,
                 decode_memory_mb: float | None = DECODE_MEMORY_MB,
                 memory_target_mb: float | None = None) -> Ct2Runner | SequentialRunner:
    """The local runner, not loaded: the guarded short-context chunk decoder over
    faster-whisper's weights (``fast``), or faster-whisper's own loop (30 s padded windows).
    ``streams``: model replicas on the CPU (calls served at the same time); ``cpu_threads``:
    CTranslate2 threads of each (0: the cores shared out among them).

    ``files``: laid out as the long-form pipeline wants it (files, the import, `sottovoce
    transcribe`): `CPU_STREAMS` decode streams on a CPU with that many cores (one on CUDA),
    batches generated in slices of `CPU_DECODE_SLICE`. A single decode call then runs on one
    replica with its share of the cores: faster-whisper's own loop over short files is slower
    that way (docs/evidence.md), so the CLI keeps an all-cores runner for
    those (`app.commands.transcribe.make_decoders`). ``decode_memory_mb``: the streams' shared
    budget for decode buffers in flight (`engine.asr.budget`; None: unbounded), made smaller at
    load when the process's ``memory_target_mb`` leaves less room (`decode_budget_mb`; the CLI's).
    """
    if files:
        from engine.asr.ct2_decoder import Ct2Runner

        return Ct2Runner(model, device=device, compute_type=compute_type,
                         streams=max(1, min(CPU_STREAMS, os.cpu_count() or 1)),
                         max_batch=CPU_DECODE_SLICE, decode_memory_mb=decode_memory_mb,
                         memory_target_mb=memory_target_mb)
    if fast:
        from engine.asr.ct2_decoder import Ct2Runner

        return Ct2Runner(model, device=device, compute_type=compute_type, streams=streams,
                         cpu_threads=cpu_threads)
    from engine.asr.sequential import SequentialRunner

    return SequentialRunner(model, device=device, compute_type=compute_type, streams=streams,
                            cpu_threads=cpu_threads)
