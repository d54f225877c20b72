"""`SequentialRunner`: faster-whisper's own decode loop (30 s padded windows, temperature
fallback, conditioning on previous text) behind the `engine.types.Runner` interface.

``decode_batch`` decodes each request in turn with ``WhisperModel.transcribe`` (no batching
gain: this is the plain baseline, and the live engine's ``--padded`` decoder). Whole files of
any length go through `iter_segments` (segments as they are decoded, so progress can move:
`engine.files`) or `decode`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from engine.asr.whisper_model import ModelRunner
from engine.errors import TranscriptionError
from engine.languages import restrict
from engine.types import (
    Audio,
    DecodeOptions,
    DecodeRequest,
    Segment,
    Transcript,
    Word,
    seconds_to_samples,
)


class SequentialRunner(ModelRunner):
    """`Runner` over faster-whisper's ``WhisperModel.transcribe``; the model as `ModelRunner`
    takes it (a name, directory or `ModelSpec`, or a `FasterWhisperModel` to share)."""

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        """Each request decoded on its own, in order (``timestamps=False``: text only)."""
        return [self.decode(r.audio, r.options, timestamps=r.timestamps) for r in requests]

    def decode(self, audio: Audio, options: DecodeOptions, *,
               timestamps: bool = True) -> Transcript:
        """One recording of any length, decoded whole."""
        started = time.perf_counter()
        segments, language = self.iter_segments(audio, options, timestamps=timestamps)
        decoded = tuple(segments)
        return Transcript(
            segments=decoded, language=language, duration=len(audio),
            decode_ms=(time.perf_counter() - started) * 1000,
        )

    def iter_segments(
        self, audio: Audio, options: DecodeOptions, *, timestamps: bool = True,
    ) -> tuple[Iterator[Segment], str | None]:
        """Segments one at a time as faster-whisper decodes them (so progress can move), and
        the language. Decoding happens while the iterator is consumed."""
        whisper = self.model.whisper
        language = options.language if self.info.multilingual else "en"
        if language is None and options.languages:
            language = _detect_among_languages(whisper, audio, options.languages)
        try:
            raw_segments, info = whisper.transcribe(
                audio, language=language, task=options.task, beam_size=options.beam_size,
                temperature=list(options.temperatures), initial_prompt=options.prompt or None,
                word_timestamps=options.word_timestamps, condition_on_previous_text=True,
                vad_filter=False, without_timestamps=not timestamps,
                hotwords=options.hotwords or None,
            )
        except (RuntimeError, ValueError) as exc:
            raise TranscriptionError(f"decode failed: {exc}") from exc

        def converted() -> Iterator[Segment]:
            try:
                for raw in raw_segments:
                    yield _convert_segment(raw)
            except (RuntimeError, ValueError) as exc:
                raise TranscriptionError(f"decode failed: {exc}") from exc

        return converted(), info.language


def _detect_among_languages(whisper: Any, audio: Audio, allowed: tuple[str, ...]) -> str | None:
    """faster-whisper's detection (every language's probability), restricted to ``allowed``."""
    try:
        _best, _p, ranked = whisper.detect_language(audio)
    except (RuntimeError, ValueError) as exc:
        raise TranscriptionError(f"language detection failed: {exc}") from exc
    return restrict(ranked, allowed)


def _convert_segment(seg: Any) -> Segment:
    words = tuple(
        Word(text=w.word, start=seconds_to_samples(w.start), end=seconds_to_samples(w.end),
             probability=float(w.probability))
        for w in (seg.words or ())
    )
    return Segment(
        text=seg.text, start=seconds_to_samples(seg.start), end=seconds_to_samples(seg.end),
        words=words, avg_logprob=float(seg.avg_logprob), no_speech_prob=float(seg.no_speech_prob),
        compression_ratio=float(seg.compression_ratio), temperature=float(seg.temperature or 0.0),
    )
