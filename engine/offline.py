"""Transcribe one whole decoded file sequentially, reporting progress as segments arrive.

This is the simple decoder behind ``sottovoce transcribe --engine sequential``: the backend's own
30 s sliding-window loop over the whole file. The batched long-form pipeline (`engine.longform`)
is the faster alternative; both return the same `Transcript`, so callers swap them freely.

Every segment is checked for hallucination signs (`engine.core.quality`) and the failed checks are
recorded in ``Segment.flags``: exporters keep the text, and the JSON export says why it is suspect.
One case is dropped outright: text the model itself believes is not speech (no-speech probability
above the threshold) over audio that is practically silent. That is Whisper's classic "You" /
"Thank you." on silence, which its own rule (no-speech *and* low log-prob) lets through.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterator

from engine.asr.base import Transcriber
from engine.asr.faster_whisper_backend import FasterWhisperTranscriber
from engine.audio.decode import load_audio
from engine.core.ladder import QualityThresholds, is_silent
from engine.core.ladder import check as check_text
from engine.types import SAMPLE_RATE, Audio, DecodeOptions, Segment, Transcript

log = logging.getLogger(__name__)

# Called with (samples decoded so far, total samples); totals are the file's length.
ProgressCallback = Callable[[int, int], None]


def transcribe_file(
    path: str | os.PathLike[str],
    transcriber: Transcriber,
    options: DecodeOptions,
    progress: ProgressCallback | None = None,
) -> Transcript:
    """Decode ``path`` (any format PyAV reads) and transcribe it.

    Raises AudioDecodeError (naming the file) for unreadable input, TranscriptionError when the
    backend fails.
    """
    return transcribe_audio(load_audio(path), transcriber, options, progress)


def transcribe_audio(
    audio: Audio,
    transcriber: Transcriber,
    options: DecodeOptions,
    progress: ProgressCallback | None = None,
    thresholds: QualityThresholds | None = None,
) -> Transcript:
    """Transcribe a whole 16 kHz mono recording with the backend's sequential decoder."""
    total = len(audio)
    started = time.perf_counter()
    if progress is not None:
        progress(0, total)
    limits = thresholds or QualityThresholds()
    stream = _segment_stream(transcriber, audio, options)
    if stream is not None:
        decoded, language = stream
    else:
        # Any other Transcriber returns the whole result at once: progress jumps to the end.
        result = transcriber.transcribe(audio, options)
        decoded, language = iter(result.segments), result.language
    segments: list[Segment] = []
    dropped = 0
    for segment in decoded:
        if _is_text_on_silence(segment, audio, limits):
            dropped += 1
            log.info("dropped %r at %.1f s: no speech in the audio", segment.text, segment.start_s)
        else:
            segments.append(_flagged(segment, limits))
        if progress is not None:
            progress(min(segment.end, total), total)
    if progress is not None:
        progress(total, total)
    elapsed = time.perf_counter() - started
    log.info("transcribed %.1f s of audio in %.2f s (%d segments)", total / SAMPLE_RATE, elapsed,
             len(segments))
    return Transcript(segments=tuple(segments), language=language, duration=total,
                      decode_ms=elapsed * 1000,
                      extra={"engine": "sequential", "dropped_silent_segments": dropped})


def _is_text_on_silence(segment: Segment, audio: Audio, limits: QualityThresholds) -> bool:
    span = audio[max(0, segment.start):max(segment.start, segment.end)]
    return is_silent(span, segment.no_speech_prob, limits)  # the quality ladder's rule


def _flagged(segment: Segment, limits: QualityThresholds) -> Segment:
    flags = check_text(segment.text, segment.end_s - segment.start_s,
                       avg_logprob=segment.avg_logprob, no_speech_prob=segment.no_speech_prob,
                       thresholds=limits)
    if not flags:
        return segment
    log.warning("suspect segment %.1f-%.1f s (%s): %r", segment.start_s, segment.end_s,
                ", ".join(flags), segment.text.strip()[:80])
    return dataclasses.replace(segment, flags=tuple(sorted(set(segment.flags) | set(flags))))


def _segment_stream(
    transcriber: Transcriber, audio: Audio, options: DecodeOptions,
) -> tuple[Iterator[Segment], str | None] | None:
    """Segments one by one from a faster-whisper backend (so progress moves), else None."""
    if not isinstance(transcriber, FasterWhisperTranscriber):
        return None
    return transcriber.iter_segments(audio, options)
