"""Files: one entry point from a recording to finished, stitched segments, in file order.

    run = transcribe_file("talk.mp3", runner, cancel=token)
    for event in run:                 # decoding happens while the events are consumed
        if isinstance(event, Progress): ...   # event.done / event.total samples (for an ETA)
        else: ...                     # a Segment on the file's timeline, final (flags set)
    run.info.language, run.info.cancelled, run.transcript()

This is the long-form pipeline (`engine.longform`): VAD chunks, batched decodes over the
runner's decode streams, the hallucination checks and retries, stitching. Each *wave* (one
batch per stream, its pieces shared out among the streams as they come free: `decode_shared`)
ends with the chunk results that no later job can
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

Memory: a path is decoded in pieces and planned a section at a time (`engine.longform.sections`),
so the audio held does not grow with the file. The native side is bounded too: the runner
decodes a wave's batch in slices (`engine.asr.CPU_DECODE_SLICE`: the decoder's
cross-attention keys and values of every item decoded together are alive at once) and aligns
one item at a time, and the C heap's free pages go back to the system after each wave and
whenever the resident size has grown by a step inside one (`engine.native_memory`), which
glibc otherwise keeps in per-thread arenas (figures: docs/evidence.md).

Short files (under `FileOptions.sequential_below_s`, 2 min) go through a `SequentialDecoder`
when the caller passes one (the CLI does): the backend's own 30 s loop, segments yielded as it
makes them with the same events, checks and cancel. It reads short clips markedly better than
the pipeline at the same beam, while on a long reading the pipeline is at par and faster
(docs/evidence.md), so the old CLI rule won and became a mode of this entry point rather than
a second one.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from engine.asr import CPU_DECODE_SLICE
from engine.core.ladder import QualityThresholds, drops, is_silent
from engine.core.ladder import check as check_text
from engine.longform.chunking import Chunk
from engine.longform.pipeline import (
    FileRun,
    LongFormOptions,
    batch_size_for,
    plan_section,
    vad_workers,
)
from engine.longform.sections import sections
from engine.longform.stitch import ChunkResult, Stitcher
from engine.native_memory import release_free_memory
from engine.types import (
    SAMPLE_RATE,
    Audio,
    DecodeOptions,
    DecodeRequest,
    Runner,
    Segment,
    Transcript,
)

if TYPE_CHECKING:
    from engine.audio.decode import AudioReader

log = logging.getLogger(__name__)

# Requests per decode call when a wave's batches are shared out among the streams
# (`decode_shared`): the CPU runner's generate slice, so a call is the work a slice was before.
# Small pieces let a stream that finishes early take work the other would otherwise hold,
# which cuts the wall time at the same CPU time and WER (figures: docs/evidence.md).
WAVE_PIECE = CPU_DECODE_SLICE

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
    """One file's run: iterate it once for `FileEvent`s; `info` says how it went.

    ``source`` is the whole recording, or an `AudioReader` decoding it piece by piece: then
    the run holds one section of it at a time (`engine.longform.sections`), whatever its
    length. ``info.duration`` is the header's length until the end is reached."""

    def __init__(self, source: Audio | AudioReader, runner: Runner, options: FileOptions,
                 cancel: CancelToken | None, sequential: SequentialDecoder | None = None) -> None:
        self.source = source
        self.runner = runner
        self.options = options
        length = len(source) if isinstance(source, np.ndarray) else source.length_within(
            options.sequential_below_s)
        expected = length if length is not None else self._expected()
        self.info = FileInfo(duration=expected, language=options.decode.language)
        self._cancel = cancel
        self._sequential = (sequential if length is not None
                            and uses_sequential(length, options, sequential) else None)
        self._segments: list[Segment] = []
        self._events: Iterator[FileEvent] | None = None
        self._section: tuple[int, Audio] = (0, np.zeros(0, dtype=np.float32))

    def _expected(self) -> int:
        source = self.source
        return len(source) if isinstance(source, np.ndarray) else source.expected_samples

    def _pieces(self) -> Iterable[Audio]:
        source = self.source
        return [source] if isinstance(source, np.ndarray) else source

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
        full = batch_size_for(self.runner.device, self.options.batch_size)
        streams = max(1, self.runner.streams)
        self.info.batch_size, self.info.streams = full, streams
        yield Progress(0, self._expected())
        stitcher = Stitcher()
        size = min(full, self.options.first_batch or full)
        pool = ThreadPoolExecutor(streams - 1, "files") if streams > 1 else None
        try:
            for section in sections(self._pieces(), self.options.chunking,
                                    workers=vad_workers()):
                self._section = (section.start, section.audio)
                run = plan_section(section.audio, section.probs, self.options)
                self.info.chunks += run.chunks
                try:
                    while run.pending and not self._cancelled(run):
                        _decode_wave(run, self.runner, size, streams, pool)
                        size = min(full, size * 2)
                        yield from self._finished(_on_file(run.take_resolved(), section.start),
                                                  stitcher)
                        if run.pending:
                            done = section.start + run.frontier
                            yield Progress(done, max(done, self._expected()))
                finally:
                    self._count(run, section.start)
                # Let this section go before the next is read and planned: one held at a time.
                self._section = (section.start, np.zeros(0, dtype=np.float32))
                del run, section
                if self.info.cancelled:
                    break
            self.info.duration = self._expected()
            if not self.info.cancelled:
                total = self.info.duration
                yield Progress(total, total)  # also when VAD found nothing to decode
        finally:
            if pool is not None:
                pool.shutdown(wait=True)  # no decode may outlive the run (an error in another)
            self.info.elapsed_s = time.perf_counter() - started
        log.info("file: %.1f s audio, %d chunks, %.2f s (%s)", self.info.duration / SAMPLE_RATE,
                 self.info.chunks, self.info.elapsed_s, self.info.counts)

    def _cancelled(self, run: FileRun) -> bool:
        if self._cancel is None or not self._cancel.is_set():
            return False
        log.info("file: cancelled with %d chunk jobs left", len(run.pending))
        self.info.cancelled = True
        return True

    def _count(self, run: FileRun, offset: int) -> None:
        """A section's counters and dropped chunks added to the file's."""
        for key, value in run.counts.items():
            self.info.counts[key] = self.info.counts.get(key, 0) + value
        for dropped in run.dropped:  # FileRun writes sample positions as ints
            start, end = dropped["start"], dropped["end"]
            assert isinstance(start, int) and isinstance(end, int)
            self.info.dropped.append({**dropped, "start": start + offset, "end": end + offset})

    def _run_sequential(self, decoder: SequentialDecoder) -> Iterator[FileEvent]:
        started = time.perf_counter()
        audio = np.concatenate(list(self._pieces()))  # short: under sequential_below_s
        self._section = (0, audio)
        total = len(audio)
        yield Progress(0, total)
        decode = self.options.decode
        if self.options.sequential_beam_size is not None:
            decode = dataclasses.replace(decode, beam_size=self.options.sequential_beam_size)
        segments, self.info.language = decoder.iter_segments(audio, decode)
        limits = self.options.retry.thresholds
        try:
            for segment in segments:
                if not self._keep(segment):
                    continue
                segment = _flagged(segment, limits, total)
                if drops(segment.flags):
                    self._drop_short(segment, total)
                    continue
                self._segments.append(segment)
                yield segment
                yield Progress(min(segment.end, total), total)
                if self._cancel is not None and self._cancel.is_set():
                    self.info.cancelled = True
                    return
            yield Progress(total, total)
        finally:
            self.info.elapsed_s = time.perf_counter() - started

    def _drop_short(self, segment: Segment, total: int) -> None:
        self.info.counts["dropped_short_segments"] = (
            self.info.counts.get("dropped_short_segments", 0) + 1)
        log.warning("dropped %r at %.1f s: %.2f s of audio cannot hold that many words (a "
                    "known Whisper invention on a snippet)", segment.text.strip(),
                    segment.start_s, (min(segment.end, total) - segment.start) / SAMPLE_RATE)

    def _keep(self, segment: Segment) -> bool:
        offset, audio = self._section  # the segment lies in the section being decoded
        local = dataclasses.replace(segment, start=segment.start - offset,
                                    end=segment.end - offset)
        if not is_text_on_silence(local, audio, self.options.retry.thresholds):
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


def _on_file(results: list[ChunkResult], offset: int) -> list[ChunkResult]:
    """A section's chunk results placed on the file's timeline (their text times are relative
    to their chunk and stay as they are)."""
    if not offset:
        return results
    return [dataclasses.replace(r, chunk=Chunk(r.chunk.start + offset, r.chunk.end + offset))
            for r in results]


def _decode_wave(run: FileRun, runner: Runner, size: int, streams: int,
                 pool: ThreadPoolExecutor | None) -> None:
    """One wave: a batch per stream, decoded on all streams at the same time (one on this
    thread), then judged in batch order so the outcome does not depend on which stream
    finished first."""
    wave = run.next_wave(size, streams)
    requests = [run.requests(batch) for batch in wave]
    run.judge_wave(wave, decode_shared(runner, requests, pool, streams))
    release_free_memory()  # the wave's native buffers: bounded RSS on long files


def decode_shared(runner: Runner, batches: list[list[DecodeRequest]],
                  pool: ThreadPoolExecutor | None, streams: int, piece: int = WAVE_PIECE
                  ) -> list[list[Transcript]]:
    """Decode ``batches`` on this thread and ``streams - 1`` of the pool's, their results in
    batch order.

    With a pool, each batch is cut into pieces of ``piece`` requests (in order: the same cut
    whatever the timing, so the same results) and every stream takes the next piece as soon
    as it is free, rather than one whole batch each: a stream whose chunks were harder no
    longer keeps the other one waiting at the end of the wave. On the CPU a decode call
    generates in slices of `engine.asr.CPU_DECODE_SLICE` anyway, so nothing is lost by the
    smaller calls (figures in WAVE_PIECE's note).
    """
    if pool is None or streams < 2:
        return [runner.decode_batch(batch) for batch in batches]
    cuts = [(b, i) for b, batch in enumerate(batches) for i in range(0, len(batch), piece)]
    pieces = deque(cuts)
    decoded: dict[tuple[int, int], list[Transcript]] = {}
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                if not pieces:
                    return
                b, i = pieces.popleft()
            try:
                decoded[b, i] = runner.decode_batch(batches[b][i:i + piece])
            except BaseException:
                with lock:
                    pieces.clear()  # the others stop after their piece: the wave has failed
                raise

    others = [pool.submit(work) for _ in range(streams - 1)]
    try:
        work()
    finally:
        wait(others)  # no decode outlives the wave, whichever stream failed
    for future in others:
        future.result()  # (a pool stream's error)
    return [[t for c, i in cuts if c == b for t in decoded[c, i]] for b in range(len(batches))]


def _flagged(segment: Segment, limits: QualityThresholds, total: int) -> Segment:
    """The sequential loop's segments get the hallucination checks' flags (the pipeline
    judges whole chunks instead, `engine.longform.retry`). Their length is the audio's, up to
    its ``total`` samples (Whisper's timestamps give a 0.1 s file a 1 s segment)."""
    seconds = max(0, min(segment.end, total) - segment.start) / SAMPLE_RATE
    flags = check_text(segment.text, seconds,
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
    source: str | os.PathLike[str] | Audio | AudioReader,
    runner: Runner,
    options: FileOptions | DecodeOptions | None = None,
    *,
    cancel: CancelToken | None = None,
    sequential: SequentialDecoder | None = None,
) -> FileTranscription:
    """Transcribe a file (a path PyAV reads, an `open_audio` reader, or 16 kHz mono samples)
    with a loaded ``runner``,
    or, when it is shorter than ``options.sequential_below_s``, with a loaded ``sequential``
    decoder if one is given (`uses_sequential`).

    Nothing is decoded until the result is iterated. Plain `DecodeOptions` (the CLI's) get the
    pipeline's defaults around them, with the guarded short-context path on
    (`LongFormOptions.coerce`). A path is decoded piece by piece as the run goes, so memory
    stays bounded whatever its length. Raises AudioDecodeError (naming the file) for a file
    that cannot be opened (missing, no audio stream, an absurd header); one that fails later
    in its decoding raises it from the iteration, as does a runner's TranscriptionError.
    """
    if not isinstance(source, np.ndarray):
        from engine.audio.decode import AudioReader, open_audio

        reader = source if isinstance(source, AudioReader) else open_audio(source)
        return FileTranscription(reader, runner, LongFormOptions.coerce(options), cancel,
                                 sequential)
    audio = np.ascontiguousarray(source, dtype=np.float32)
    if audio.ndim != 1:
        raise ValueError("audio must be mono: a 1-D array of 16 kHz samples")
    return FileTranscription(audio, runner, LongFormOptions.coerce(options), cancel, sequential)

