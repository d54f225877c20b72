"""The per-chunk `Transcriber` protocol, on its way out: every backend becomes a
`engine.types.Runner` (``decode_batch``). The value types live in `engine.types`."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from engine.types import Audio, DecodeOptions, ModelInfo, Transcript


@runtime_checkable
class Transcriber(Protocol):
    """Turns 16 kHz mono float32 audio into a `Transcript`. Must be safe to call from one
    worker thread; `load()` is explicit (no work in constructors)."""

    @property
    def info(self) -> ModelInfo: ...

    def load(self) -> None: ...

    def transcribe(self, audio: Audio, options: DecodeOptions) -> Transcript: ...
