"""Files: one entry point from a recording to finished, stitched segments, in file order.

    run = transcribe_file("talk.mp3", runner, cancel=token)
    for event in run:                 # decoding happens while the events are consumed
        if isinstance(event, Progress): ...   # event.done / event.total samples (for an ETA)
        else: ...                     # a Segment on the file's timeline, final (flags set)
    run.info.language, run.info.cancelled, run.transcript()

This is the long-form pipeline (`engine.longform`): VAD chunks, batched decodes over the
runner's decode streams, the hallucination checks and retries, stitching. Each *wave* (one
batch per stream, decoded at the same time) ends with the chunk results that no later job can
change: they are stitched and their segments yielded at once, then the progress (everything
before the earliest unfinished chunk is done). Waves may start small and double
(`FileOptions.first_batch`; the app's import does) so the first text shows after one chunk per
stream. Cancel is
checked before each wave: the wave in flight finishes, its final prefix is yielded, and the
run ends with ``info.cancelled`` set; what was yielded is a prefix of the full result.

The steps are separately callable for a driver that fans batches out elsewhere (a cluster):
`engine.longform.plan_file` (VAD and chunk plan), `FileRun.next_wave/requests/judge_wave/
take_resolved` (a wave's batches, their results judged), `engine.longform.Stitcher` (segments
of resolved results). Only `_decode_wave` (local threads, one per stream) is this module's own.

Short files (under `FileOptions.sequential_below_s`, 2 min) go through a `SequentialDecoder`
when the caller passes one (the CLI does): the backend's own 30 s loop, segments yielded as it
makes them with the same events, checks and cancel. Measured before deciding: on the 26 short
English clips it scored 9.9 % WER against 15.4 % for the pipeline at the same beam (5); on the
231 s reading the pipeline is at par and 1.5x faster (bench/transcribe.py). So the old CLI rule
won and became a mode of this entry point rather than a second one.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from engine.core.ladder import QualityThresholds, is_silent
from engine.core.ladder import check as check_text
from engine.longform.pipeline import FileRun, LongFormOptions, batch_size_for, plan_file
from engine.longform.stitch import ChunkResult, Stitcher
from engine.types import SAMPLE_RATE, Audio, DecodeOptions, Runner, Segment, Transcript

log = logging.getLogger(__name__)

FileOptions = LongFormOptions  # one options class: the pipeline's (batch sizes included)


class CancelToken(Protocol):
    def is_set(self) -> bool: ...


class SequentialDecoder(Protocol):
    """A backend's own loop over a whole recording (`engine.asr.sequential.SequentialRunner`): segments on
    the recording's timeline, one at a time as they are decoded, and the language."""

    def iter_segments(self, audio: Audio, options: DecodeOptions
                      ) -> tuple[Iterator[Segment], str | None]: ...


@dataclass(frozen=True)
class Progress:
    """``done`` of ``total`` samples have final text (silence included)."""

    done: int
    total: int


FileEvent = Segment | Progress


@dataclass
class FileInfo:
    """What a run found out; filled in as it goes (complete once iteration has ended)."""

    duration: int
    language: str | None = None
    chunks: int = 0
    batch_size: int = 0
    streams: int = 1
    cancelled: bool = False
    elapsed_s: float = 0.0
    dropped: list[dict[str, object]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


class FileTranscription:
    """One file's run: iterate it once for `FileEvent`s; `info` says how it went."""

    def __init__(self, audio: Audio, runner: Runner, options: FileOptions,
                 cancel: CancelToken | None, sequential: SequentialDecoder | None = None) -> None:
        self.audio = audio
        self.runner = runner
        self.options = options
        self.info = FileInfo(duration=len(audio), language=options.decode.language)
        self._cancel = cancel
        self._sequential = sequential if uses_sequential(len(audio), options, sequential) else None
        self._segments: list[Segment] = []
        self._events: Iterator[FileEvent] | None = None

    def __iter__(self) -> Iterator[FileEvent]:
        if self._events is not None:
            raise RuntimeError("a file transcription is iterated once")
        self._events = self._run() if self._sequential is None else self._run_sequential(
            self._sequential)
        return self._events

    def transcript(self) -> Transcript:
        """Everything as one `Transcript` (runs what is not consumed yet to the end)."""
        if self._events is None:
            iter(self)
        assert self._events is not None
        for _ in self._events:
            pass
        info = self.info
        extra: dict[str, object] = {
            "engine": "longform" if self._sequential is None else "sequential",
            "chunks": info.chunks, "batch_size": info.batch_size, "streams": info.streams,
            "cancelled": info.cancelled, "dropped": info.dropped, **info.counts}
        return Transcript(segments=tuple(self._segments), language=info.language,
                          duration=info.duration, decode_ms=info.elapsed_s * 1000, extra=extra)

    def _run(self) -> Iterator[FileEvent]:
        started = time.perf_counter()
        total = len(self.audio)
        full = batch_size_for(self.runner.device, self.options.batch_size)
        streams = max(1, self.runner.streams)
        self.info.batch_size, self.info.streams = full, streams
        yield Progress(0, total)
        run = plan_file(self.audio, self.options)
        self.info.chunks = run.chunks
        stitcher = Stitcher()
        size = min(full, self.options.first_batch or full)
        pool = ThreadPoolExecutor(streams - 1, "files") if streams > 1 else None
        try:
            while run.pending:
                if self._cancel is not None and self._cancel.is_set():
                    log.info("file: cancelled with %d chunk jobs left", len(run.pending))
                    self.info.cancelled = True
                    break
                _decode_wave(run, self.runner, size, streams, pool)
                size = min(full, size * 2)
                yield from self._finished(run.take_resolved(), stitcher)
                if run.pending:
                    yield Progress(run.frontier, total)
            if not self.info.cancelled:
                yield Progress(total, total)  # also when VAD found nothing to decode
        finally:
            if pool is not None:
                pool.shutdown(wait=True)  # no decode may outlive the run (an error in another)
            self.info.counts.update(run.counts)
            self.info.dropped = run.dropped
            self.info.elapsed_s = time.perf_counter() - started
        log.info("file: %.1f s audio, %d chunks, %.2f s (%s)", total / SAMPLE_RATE, run.chunks,
                 self.info.elapsed_s, self.info.counts)

    def _run_sequential(self, decoder: SequentialDecoder) -> Iterator[FileEvent]:
        started = time.perf_counter()
        total = len(self.audio)
        yield Progress(0, total)
        segments, self.info.language = decoder.iter_segments(self.audio, self.options.decode)
        limits = self.options.retry.thresholds
        try:
            for segment in segments:
                if not self._keep(segment):
                    continue
                segment = _flagged(segment, limits)
                self._segments.append(segment)
                yield segment
                yield Progress(min(segment.end, total), total)
                if self._cancel is not None and self._cancel.is_set():
                    self.info.cancelled = True
                    return
            yield Progress(total, total)
        finally:
            self.info.elapsed_s = time.perf_counter() - started

    def _keep(self, segment: Segment) -> bool:
        if not is_text_on_silence(segment, self.audio, self.options.retry.thresholds):
            return True
        self.info.counts["dropped_silent_segments"] = (
            self.info.counts.get("dropped_silent_segments", 0) + 1)
        log.info("dropped %r at %.1f s: no speech in the audio", segment.text, segment.start_s)
        return False

    def _finished(self, results: list[ChunkResult], stitcher: Stitcher) -> Iterator[Segment]:
        if self.info.language is None:
            self.info.language = next(
                (r.transcript.language for r in results if r.transcript.language), None)
        for segment in stitcher.add(results):
            if self._keep(segment):
                self._segments.append(segment)
                yield segment


def _decode_wave(run: FileRun, runner: Runner, size: int, streams: int,
                 pool: ThreadPoolExecutor | None) -> None:
    """One wave: a batch per stream, all decoded at the same time (the first on this thread),
    then judged in batch order so the outcome does not depend on which stream finished first."""
    wave = run.next_wave(size, streams)
    requests = [run.requests(batch) for batch in wave]
    others = [pool.submit(runner.decode_batch, r) for r in requests[1:]] if pool else []
    decoded = [runner.decode_batch(requests[0]), *(f.result() for f in others)]
    run.judge_wave(wave, decoded)


def _flagged(segment: Segment, limits: QualityThresholds) -> Segment:
    """The sequential loop's segments get the hallucination checks' flags (the pipeline
    judges whole chunks instead, `engine.longform.retry`)."""
    flags = check_text(segment.text, segment.end_s - segment.start_s,
                       avg_logprob=segment.avg_logprob, no_speech_prob=segment.no_speech_prob,
                       thresholds=limits)
    if not flags:
        return segment
    log.warning("suspect segment %.1f-%.1f s (%s): %r", segment.start_s, segment.end_s,
                ", ".join(flags), segment.text.strip()[:80])
    return dataclasses.replace(segment, flags=tuple(sorted(set(segment.flags) | set(flags))))


def uses_sequential(samples: int, options: FileOptions,
                    sequential: SequentialDecoder | None) -> bool:
    """Whether a file of ``samples`` goes to ``sequential`` (so a caller loads that model)."""
    return sequential is not None and samples < options.sequential_below_s * SAMPLE_RATE


def is_text_on_silence(segment: Segment, audio: Audio, limits: QualityThresholds) -> bool:
    """Text the model itself believes is not speech over practically silent audio: Whisper's
    classic "You" / "Thank you." on silence, which its own rule (no-speech *and* low log-prob)
    lets through. The quality ladder's rule (`engine.core.ladder.is_silent`); the long-form
    checks judge whole chunks, this one each stitched segment."""
    span = audio[max(0, segment.start):max(segment.start, segment.end)]
    return is_silent(span, segment.no_speech_prob, limits)


def transcribe_file(
    source: str | os.PathLike[str] | Audio,
    runner: Runner,
    options: FileOptions | DecodeOptions | None = None,
    *,
    cancel: CancelToken | None = None,
    sequential: SequentialDecoder | None = None,
) -> FileTranscription:
    """Transcribe a file (a path PyAV reads, or 16 kHz mono samples) with a loaded ``runner``,
    or, when it is shorter than ``options.sequential_below_s``, with a loaded ``sequential``
    decoder if one is given (`uses_sequential`).

    Nothing is decoded until the result is iterated. Plain `DecodeOptions` (the CLI's) get the
    pipeline's defaults around them, with the guarded short-context path on
    (`LongFormOptions.coerce`). Raises AudioDecodeError (naming the file) for unreadable input;
    a runner's TranscriptionError comes out of the iteration.
    """
    if isinstance(source, np.ndarray):
        audio = np.ascontiguousarray(source, dtype=np.float32)
    else:
        from engine.audio.decode import load_audio

        audio = load_audio(source)
    if audio.ndim != 1:
        raise ValueError("audio must be mono: a 1-D array of 16 kHz samples")
    return FileTranscription(audio, runner, LongFormOptions.coerce(options), cancel, sequential)


def file_runner(model: str | None = None, *, device: str = "auto",
                compute_type: str = "auto") -> Runner:
    """The local runner (not loaded) as files want it: `engine.longform.long_form_backend`'s
    `Ct2Runner` with its decode streams."""
    from engine.longform.runners import long_form_backend

    return long_form_backend(model, device=device, compute_type=compute_type)
