"""Fast, guarded Whisper chunk decoding on CTranslate2, one batch at a time.

faster-whisper pads every chunk to a 30 s window, so a 3 s chunk pays for a 30 s encoder pass,
many times what the chunk alone costs (docs/evidence.md). The *short*
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

`Ct2Runner` is the `engine.types.Runner` the live engine, the long-form pipeline and the server's
cross-session scheduler decode with: all items of a path are encoded in one call and generated
in one call (per-item prompts and languages).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from engine.asr.budget import MB, ByteBudget, decode_budget_mb
from engine.asr.short_context import ShortContextSettings
from engine.asr.whisper_model import FasterWhisperModel, ModelRunner
from engine.core.quality import QualityThresholds
from engine.errors import EngineError, TranscriptionError, missing_dependency
from engine.models import ModelSpec
from engine.types import DecodeRequest, Segment, Transcript

log = logging.getLogger(__name__)

__all__ = ["Ct2Runner", "ShortContextSettings"]


class Ct2Runner(ModelRunner):
    """`Runner`: batched, guarded chunk decoding on the CTranslate2 model inside faster-whisper.

    ``model``: a model name, directory or `ModelSpec` (loaded by `load()` with ``device``,
    ``compute_type``, ``cpu_threads`` and ``streams``, see `FasterWhisperModel`), or an existing
    `FasterWhisperModel` to share (its weights and layout; those arguments are then ignored).
    A request takes the short path when ``options.short_context`` is set. ``max_batch`` (CPU
    only): generate (and align) run over slices of at most that many items of a pass, one
    after the other, at the pass's width, so the text is the same as in one call; memory grows
    with the items generated together (each holds its cross-attention keys and values), CPU
    time per item did not (see `engine.longform.runners`). Calls are synchronous;
    CTranslate2 releases the GIL while it works, and up to ``streams`` calls from as many
    threads run at the same time (further calls wait for a replica). ``decode_memory_mb``:
    a byte budget (`engine.asr.budget.ByteBudget`) shared by those calls: each generate()
    and align() call holds its estimated buffers from it, generate() slices are cut to fit
    it, and a call waits while the other streams hold too much (None: no budget); with
    ``memory_target_mb``, `load()` makes it smaller when the process as loaded leaves less room
    under that target (`engine.asr.budget.decode_budget_mb`).
    """

    def __init__(
        self,
        model: str | ModelSpec | FasterWhisperModel | None = None,
        *,
        device: str = "auto",
        compute_type: str = "auto",
        cpu_threads: int = 0,
        streams: int = 1,
        thresholds: QualityThresholds | None = None,
        short: ShortContextSettings | None = None,
        max_batch: int | None = None,
        decode_memory_mb: float | None = None,
        memory_target_mb: float | None = None,
    ) -> None:
        super().__init__(model, device=device, compute_type=compute_type,
                         cpu_threads=cpu_threads, streams=streams)
        self._thresholds = thresholds or QualityThresholds()
        self._short = short or ShortContextSettings()
        if max_batch is not None and max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self._max_batch = max_batch
        self._decode_memory_mb = decode_memory_mb
        self._memory_target_mb = memory_target_mb
        self.budget = ByteBudget(int(decode_memory_mb * MB)) if decode_memory_mb else None

    def load(self) -> None:
        """Load the model, then size the decode budget from what the process holds now
        (`engine.asr.budget.decode_budget_mb`)."""
        loaded_before = self.model.loaded_rss is not None
        super().load()
        if self._decode_memory_mb and self._memory_target_mb and not loaded_before:
            rss = self.model.loaded_rss
            mb = decode_budget_mb(None if rss is None else rss / MB, self._decode_memory_mb,
                                  self._memory_target_mb)
            if mb != self._decode_memory_mb:
                log.info("decode memory budget %.0f MB (%.0f MB resident with the model)",
                         mb, (rss or 0) / MB)
            self.budget = ByteBudget(int(mb * MB))

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        """Decode every request; results come back in request order."""
        if not requests:
            return []
        whisper = self.model.whisper  # EngineError before load()
        try:
            from engine.asr import ct2_batch
        except ImportError as exc:
            raise missing_dependency("faster-whisper", "local") from exc
        started = time.perf_counter()
        slice_size = self._max_batch if self._max_batch and self.device == "cpu" else None
        try:
            outcomes = ct2_batch.decode(whisper, requests, self._thresholds, self._short,
                                        max_generate=slice_size, budget=self.budget)
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
