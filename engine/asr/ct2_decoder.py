"""Fast, guarded Whisper chunk decoding on CTranslate2, one batch at a time.

faster-whisper pads every chunk to a 30 s window, so a 3 s chunk pays for a 30 s encoder pass
(~400 ms for tiny.en int8 on two CPU cores, against ~20 ms for the chunk alone). The *short*
path encodes the chunk plus a little padding at its own length. Whisper was trained on 30 s
windows only, and on a short window it often transcribes the chunk right and then carries on:
it starts a new segment at (or past) the audio end and says it all again, or restarts from the
first word until the token budget (capped by duration) stops it. Those runs are cut back to
their first pass when the evidence is clear (a repeat past the audio end; a restart from the
top with no end-of-text). Every short result is then checked (`engine.asr.ct2_guards`: loops,
repeats, compression, words per minute, log-prob, no-speech) and a failed item is decoded again
on the *padded* path, which mirrors faster-whisper's single-window decode (temperature fallback
included). ``Transcript.extra`` says which path produced the text, why a fallback happened, and
whether a loop was cut.

`Ct2WhisperRunner.decode_batch` is the batch runner interface shared by the live engine, the
long-form pipeline and the server's cross-session scheduler: all items of a path are encoded in
one call and generated in one call (per-item prompts and languages).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from engine.core.quality import QualityThresholds
from engine.errors import EngineError, TranscriptionError, missing_dependency
from engine.types import (
    MAX_SAMPLES,
    Audio,
    DecodeOptions,
    DecodeRequest,
    ModelInfo,
    Segment,
    Transcript,
)

log = logging.getLogger(__name__)

SHORT = "short"
PADDED = "padded"


@dataclass(frozen=True)
class ShortContextSettings:
    """Tuning of the short path.

    Attributes:
      pad_s: silence added after the longest chunk of a batch before encoding; gives the model
        room to place the final timestamp and EOT instead of looping at a hard window edge.
      max_s: chunks longer than this always take the padded path (little to gain there).
      timestamp_cues: also fall back when the last timestamp lies past the audio end or the text
        stops early while loud audio goes on ("past_end", "early_end"). Off by default: on a
        short window Whisper's timestamps are unreliable (a correct "Lord, but I am glad to see
        you again, Phil.<|5.00|>" on 2.8 s of audio); on the shared English set these cues
        caused 3 fallbacks out of 47 chunks and no WER gain (10.8 % with them, 10.4 % without,
        padded 10.1 %, greedy). The end-of-text cue (no EOT within the token budget) is always
        on, and segments that start past the audio end are always dropped when they only
        repeat earlier words.
    """

    pad_s: float = 1.0
    max_s: float = 25.0
    timestamp_cues: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.pad_s <= 10.0:
            raise ValueError("pad_s must be within 0..10 s")
        if not 0.0 < self.max_s <= 30.0:
            raise ValueError("max_s must be within 0..30 s")


class Ct2WhisperRunner:
    """Batched chunk decoding on the CTranslate2 model inside a loaded faster-whisper model.

    ``whisper_model`` is a ``faster_whisper.WhisperModel`` (``FasterWhisperTranscriber.model``);
    the weights are shared, nothing is loaded here. Calls are synchronous; CTranslate2 releases
    the GIL while it works, and concurrent calls from several threads are safe.
    """

    def __init__(
        self,
        whisper_model: Any,
        *,
        thresholds: QualityThresholds | None = None,
        short: ShortContextSettings | None = None,
    ) -> None:
        self._whisper = whisper_model
        self._thresholds = thresholds or QualityThresholds()
        self._short = short or ShortContextSettings()

    @property
    def whisper_model(self) -> Any:
        """The shared ``faster_whisper.WhisperModel``."""
        return self._whisper

    @property
    def device(self) -> str:
        """"cuda" or "cpu": where the CTranslate2 model runs (choose batch sizes from it)."""
        return "cuda" if str(self._whisper.model.device).startswith("cuda") else "cpu"

    @property
    def streams(self) -> int:
        """How many ``decode_batch`` calls can run at the same time: the CTranslate2 model's
        replicas (``FasterWhisperTranscriber(streams=...)``); further calls wait for one."""
        return max(1, int(getattr(self._whisper.model, "num_workers", 1)))

    @property
    def multilingual(self) -> bool:
        return bool(self._whisper.model.is_multilingual)

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        """Decode every request; results come back in request order."""
        if not requests:
            return []
        try:
            from engine.asr import ct2_batch
        except ImportError as exc:
            raise missing_dependency("faster-whisper", "local") from exc
        started = time.perf_counter()
        try:
            outcomes = ct2_batch.decode(self._whisper, requests, self._thresholds, self._short)
        except (EngineError, ValueError, RuntimeError) as exc:
            if isinstance(exc, EngineError):
                raise
            raise TranscriptionError(f"batch decode failed: {exc}") from exc
        decode_ms = (time.perf_counter() - started) * 1000
        return [_transcript(o, decode_ms) for o in outcomes]


def _transcript(outcome: Any, decode_ms: float) -> Transcript:
    segments: tuple[Segment, ...] = outcome.segments
    return Transcript(
        segments=segments, language=outcome.language, duration=outcome.duration,
        decode_ms=decode_ms,
        # path: "short" | "padded" | "skipped" (under 0.1 s of audio: not decoded at all).
        extra={"path": outcome.path, "fallback": outcome.fallback,
               "temperature": outcome.temperature, "batch_size": outcome.batch_size,
               "loop_trimmed": outcome.loop_trimmed},
    )


class FastChunkTranscriber:
    """`Transcriber` over `Ct2WhisperRunner`: one chunk per call, the short path when
    ``options.short_context`` is set. Wraps a `FasterWhisperTranscriber` (or anything with
    ``info``, ``load()`` and a ``model`` that is a faster-whisper ``WhisperModel``)."""

    def __init__(self, backend: Any, *, short: ShortContextSettings | None = None) -> None:
        self._backend = backend
        self._short = short
        self._runner: Ct2WhisperRunner | None = None

    @property
    def info(self) -> ModelInfo:
        info: ModelInfo = self._backend.info
        return info

    @property
    def runner(self) -> Ct2WhisperRunner:
        if self._runner is None:
            raise EngineError("model not loaded: call load() first")
        return self._runner

    def load(self) -> None:
        if self._runner is None:
            self._backend.load()
            self._runner = Ct2WhisperRunner(self._backend.model, short=self._short)

    # The `engine.types.Runner` protocol, delegated (files: engine.files.local_runner).
    @property
    def streams(self) -> int:
        return self.runner.streams

    @property
    def device(self) -> str:
        return self.runner.device

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        return self.runner.decode_batch(requests)

    def transcribe(self, audio: Audio, options: DecodeOptions) -> Transcript:
        """Decode one chunk. Audio over 30 s (not a chunk; the long-form pipeline cuts at
        silences) is cut into plain 30 s windows decoded as one batch, so the same guards
        apply; a word straddling a cut may be garbled."""
        runner = self.runner
        if len(audio) <= MAX_SAMPLES:
            return runner.decode_batch([DecodeRequest(audio=audio, options=options)])[0]
        starts = range(0, len(audio), MAX_SAMPLES)
        parts = runner.decode_batch(
            [DecodeRequest(np.ascontiguousarray(audio[s:s + MAX_SAMPLES]), options)
             for s in starts])
        segments = tuple(_shifted(seg, start)
                         for part, start in zip(parts, starts, strict=True)
                         for seg in part.segments)
        return Transcript(
            segments=segments, language=parts[0].language, duration=len(audio),
            decode_ms=parts[0].decode_ms,
            extra={"path": "windows", "fallback": None,
                   "window_paths": [p.extra["path"] for p in parts]},
        )


def _shifted(segment: Segment, offset: int) -> Segment:
    words = tuple(replace(w, start=w.start + offset, end=w.end + offset) for w in segment.words)
    return replace(segment, start=segment.start + offset, end=segment.end + offset, words=words)
