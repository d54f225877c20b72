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

from engine.types import Runner


def local_runner(model: str | None = None, *, fast: bool = True, device: str = "auto",
                 streams: int = 1, cpu_threads: int = 0) -> Runner:
    """The default local runner, not loaded: the guarded short-context chunk decoder over
    faster-whisper's weights (``fast``), or faster-whisper's own loop (30 s padded windows).
    ``streams``: model replicas on the CPU (calls served at the same time); ``cpu_threads``:
    CTranslate2 threads of each (0: the cores shared out among them)."""
    if fast:
        from engine.asr.ct2_decoder import Ct2Runner

        return Ct2Runner(model, device=device, streams=streams, cpu_threads=cpu_threads)
    from engine.asr.sequential import SequentialRunner

    return SequentialRunner(model, device=device, streams=streams, cpu_threads=cpu_threads)
