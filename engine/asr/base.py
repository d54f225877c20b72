"""The one interface every ASR backend implements, and its options."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from engine.types import Transcript

Audio = npt.NDArray[np.float32]  # mono float32 in [-1, 1] at 16 kHz


@dataclass(frozen=True)
class DecodeOptions:
    """How to decode one piece of audio.

    Attributes:
      language: ISO 639-1 code, or None to detect (ignored by English-only models).
      prompt: previous text to condition on (already checked and capped by the caller).
      word_timestamps: compute per-word times (costs a cross-attention alignment pass).
      beam_size: 1 = greedy. faster-whisper's default is 5.
      temperatures: fallback schedule; the first is tried first.
      short_context: allow the fast unpadded encoder path where a backend has one.
      task: "transcribe" or "translate".
    """

    language: str | None = None
    prompt: str | None = None
    word_timestamps: bool = True
    beam_size: int = 5
    temperatures: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    short_context: bool = False
    task: str = "transcribe"

    def __post_init__(self) -> None:
        if self.beam_size < 1:
            raise ValueError("beam_size must be >= 1")
        if not self.temperatures:
            raise ValueError("temperatures must not be empty")
        if self.task not in ("transcribe", "translate"):
            raise ValueError("task must be 'transcribe' or 'translate'")
        if self.language is not None and not self.language.isalpha():
            raise ValueError(f"invalid language code {self.language!r}")


@dataclass(frozen=True)
class ModelInfo:
    """What the status line shows: model name, device and compute type."""

    name: str
    device: str
    compute_type: str
    multilingual: bool


@runtime_checkable
class Transcriber(Protocol):
    """Turns 16 kHz mono float32 audio into a `Transcript`. Must be safe to call from one
    worker thread; `load()` is explicit (no work in constructors)."""

    @property
    def info(self) -> ModelInfo: ...

    def load(self) -> None: ...

    def transcribe(self, audio: Audio, options: DecodeOptions) -> Transcript: ...
