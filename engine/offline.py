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
import math
import os
import time
from collections.abc import Callable, Iterator

import numpy as np

from engine.asr.sequential import SequentialRunner
from engine.audio.decode import load_audio
from engine.core.quality import QualityThresholds, check_text
from engine.types import (
    MAX_SAMPLES,
    SAMPLE_RATE,
    Audio,
    DecodeOptions,
    DecodeRequest,
    Runner,
    Segment,
    Transcript,
)

log = logging.getLogger(__name__)

# Called with (samples decoded so far, total samples); totals are the file's length.
ProgressCallback = Callable[[int, int], None]

# -60 dBFS RMS: below any speech in the shared corpus (whispered speech there is about -55 dBFS).
SILENCE_RMS = 10 ** (-60 / 20)


def transcribe_file(
    path: str | os.PathLike[str],
    transcriber: Runner,
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
    transcriber: Runner,
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
        # Any other Runner returns the whole result at once: progress jumps to the end.
        decoded, language = _decode_windows(transcriber, audio, options)
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
    if segment.no_speech_prob <= limits.no_speech:
        return False
    span = audio[max(0, segment.start):max(segment.start, segment.end)]
    rms = math.sqrt(float(np.mean(np.square(span, dtype=np.float64)))) if span.size else 0.0
    return rms < SILENCE_RMS


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
    transcriber: Runner, audio: Audio, options: DecodeOptions,
) -> tuple[Iterator[Segment], str | None] | None:
    """Segments one by one from faster-whisper's own loop (so progress moves), else None."""
    if not isinstance(transcriber, SequentialRunner):
        return None
    return transcriber.iter_segments(audio, options)


def _decode_windows(
    runner: Runner, audio: Audio, options: DecodeOptions,
) -> tuple[Iterator[Segment], str | None]:
    """Plain 30 s windows decoded as one batch, segments moved onto the file's timeline."""
    starts = range(0, len(audio), MAX_SAMPLES) if len(audio) else range(1)
    parts = runner.decode_batch([DecodeRequest(np.ascontiguousarray(audio[s:s + MAX_SAMPLES]),
                                               options) for s in starts])
    segments = [dataclasses.replace(
        seg, start=seg.start + s, end=seg.end + s,
        words=tuple(dataclasses.replace(w, start=w.start + s, end=w.end + s) for w in seg.words))
        for part, s in zip(parts, starts, strict=True) for seg in part.segments]
    return iter(segments), parts[0].language
