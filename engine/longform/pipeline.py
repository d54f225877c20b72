"""The long-recording pipeline: VAD chunks -> batched decodes -> checks/retries -> one timeline.

Work is a queue of chunk jobs in file order. Each round (a *wave*) takes up to ``batch_size`` jobs
per decode stream and hands each stream's batch to the runner as one ``decode_batch`` call (one
batched CTranslate2 generate), all streams at the same time. A stream is a model replica
(`FasterWhisperTranscriber(streams=2)` on the CPU: two replicas of one thread each, sharing the
weights); CTranslate2 releases the GIL, so plain threads keep both cores busy. Two one-thread
streams beat one two-thread stream here because a decoder step is too small to split well over
two cores: on the 20 min mix, 13.0-14.2 s against 19.1-20.2 s wall, and 24-27 against 29-31 s
of CPU (batches of 8 per stream: 16-17 s; of 24 or 32: 14-16 s). After a wave, every result is
judged in batch order
(`engine.longform.retry`), so the outcome does not depend on which stream finished first:
accepted, re-decoded hotter, split, or given up on; follow-up jobs go to the front of the queue
so progress keeps moving along the file.

First decodes are text-only (no timestamp tokens: fewer tokens and cheaper steps; against timed
first decodes, interleaved on the busy 2-core machine: 7-10 % less CPU, WER 5.4 vs 6.1 % on the
231 s reading with fewer errors at chunk borders, 12.9 vs 12.8 % on the 20 min mix). Two
weaknesses of text-only decoding are sent back for a timed decode: a chunk whose text is too
short for the speech VAD heard in it (Whisper stopped early, and a text-only decode cannot say
where), and text that says a phrase twice back to back (spontaneous speech loops more often
without timestamps; without this check the mix scored 14.0 %). A timed decode that stops early (text ends while VAD still hears speech in the
rest of the chunk) gets a *continuation* job for the undecoded tail, like Whisper's own seek
loop; the border duplicates that may create are removed when stitching.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from engine.core.quality import max_ngram_repeats, words_of
from engine.longform import retry
from engine.longform.chunking import (
    VAD_WINDOW,
    Chunk,
    ChunkingOptions,
    Probabilities,
    plan_chunks,
    speech_probabilities,
    split_at_quiet,
)
from engine.longform.retry import RetryPolicy, Step, Verdict
from engine.longform.runners import (
    BatchRunner,
    as_runner,
    choose_batch_size,
    decode_streams,
    free_memory_bytes,
    runner_device,
)
from engine.longform.stitch import (
    ChunkResult,
    covered_until,
    first_uncovered_speech,
    stitch,
    text_spans,
)
from engine.types import SAMPLE_RATE, Audio, DecodeOptions, DecodeRequest, Transcript

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int], None]
PHRASE_SIZES = tuple(range(4, 13))  # phrases (in words) whose back-to-back repeat sends a chunk to timed

# Greedy, short-context decoding (first decodes text-only, see LongFormOptions): on tiny.en
# int8 it measured at or below the WER of faster-whisper's beam-5 batched pipeline on the
# shared long-form reading and on a 20 min mix of the corpus, at about a third of its CPU time
# (bench/longform.py). Beam search mostly re-ranks near-identical hypotheses here, and short
# windows cost the encoder only what they hold, so that is where the time goes away.
DEFAULT_DECODE = DecodeOptions(beam_size=1, short_context=True, word_timestamps=True)


class CancelToken(Protocol):
    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class LongFormOptions:
    """Everything `transcribe_long` can be told.

    Attributes:
      decode: options of every chunk's first decode (greedy and short-context by default).
      chunking: how VAD speech is cut and packed. 8-12 s chunks measured best with the
        short-context encoder: 20-28 s chunks took 1.6x the CPU time on the 231 s reading (each
        decoder step attends over the whole window), 6-10 s chunks lost 1 WER point there and
        fell back to the padded window twice as often on the 20 min mix. Lower VAD thresholds
        (0.35/0.15) win back part of the whispered and falsetto clips of the mix (WER 14.0 ->
        12.7 %) but cost 8 % more CPU and 0.5 point on the reading; bench/longform.py.
      retry: hallucination thresholds and the retry ladder.
      continue_early_end: decode the tail of a chunk whose text stopped while speech went on.
      min_tail_speech_s: how much VAD speech the undecoded tail must hold to be continued.
      max_continuations: continuation jobs allowed per original chunk (bounds the work).
      lookahead_batches: how far ahead of the oldest job a batch may pick similar-length jobs.
      text_only_first: decode chunks without timestamp tokens first (see the module notes).
      min_words_per_speech_s: a text-only decode with fewer words per second of VAD speech is
        decoded again with timestamps. Read speech runs at 2.5-3 words/s; on the 20 min mix of
        the shared corpus every chunk Whisper cut short scored under 2.1, and 11 of 144 chunks
        in all scored under 2.2 (bench/longform.py).
      min_sparse_check_s: chunks with less VAD speech than this are not judged by word rate.
    """

    decode: DecodeOptions = DEFAULT_DECODE
    chunking: ChunkingOptions = field(
        default_factory=lambda: ChunkingOptions(target_chunk_s=8.0, max_chunk_s=12.0))
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    continue_early_end: bool = True
    min_tail_speech_s: float = 0.5
    max_continuations: int = 2
    lookahead_batches: int = 3
    text_only_first: bool = True
    min_words_per_speech_s: float = 2.2
    min_sparse_check_s: float = 2.0

    def __post_init__(self) -> None:
        if self.min_words_per_speech_s < 0 or self.min_sparse_check_s < 0:
            raise ValueError("min_words_per_speech_s and min_sparse_check_s must not be negative")
        if self.lookahead_batches < 1:
            raise ValueError("lookahead_batches must be >= 1")
        if self.min_tail_speech_s <= 0:
            raise ValueError("min_tail_speech_s must be positive")
        if self.max_continuations < 0:
            raise ValueError("max_continuations must not be negative")

    @classmethod
    def coerce(cls, options: LongFormOptions | DecodeOptions | None) -> LongFormOptions:
        """Accept the pipeline's own options, plain DecodeOptions (the CLI's), or None.

        Plain DecodeOptions get the short-context path switched on: here every short decode is
        checked and falls back to the padded window when it misbehaves, and it is most of the
        speed-up. To forbid it, pass ``LongFormOptions(decode=...)`` with it off.
        """
        if options is None:
            return cls()
        if isinstance(options, DecodeOptions):
            return cls(decode=dataclasses.replace(options, short_context=True))
        return options


@dataclass(frozen=True)
class _Job:
    chunk: Chunk
    step: Step
    options: DecodeOptions
    continuations: int = 0
    timestamps: bool = True


class _Run:
    """One pipeline run's state (private): the job queue, results and counters."""

    def __init__(self, audio: Audio, probs: Probabilities, options: LongFormOptions) -> None:
        self.audio = audio
        self.probs = probs
        self.options = options
        self.results: list[ChunkResult] = []
        self.dropped: list[dict[str, object]] = []
        self.counts: Counter[str] = Counter()
        self.pending: deque[_Job] = deque()

    def speech_seconds(self, chunk: Chunk) -> float:
        window = self.probs[chunk.start // VAD_WINDOW: -(-chunk.end // VAD_WINDOW)]
        return float(np.count_nonzero(window >= self.options.chunking.threshold)) * (
            VAD_WINDOW / SAMPLE_RATE)

    def timed_redecode_reason(self, job: _Job, transcript: Transcript) -> str | None:
        """Why a text-only decode should be decoded again with timestamps, or None.

        "sparse": its words are too few for the VAD speech of its chunk (Whisper stopped early;
        a timed decode can be continued). "repeats": a phrase of 4+ words said twice back to
        back, which text-only decodes of spontaneous speech produce more often than timed ones
        (and which passes the looser loop checks).
        """
        if job.timestamps:
            return None
        if max_ngram_repeats(transcript.text, PHRASE_SIZES) >= 2:
            return "repeats"
        speech = self.speech_seconds(job.chunk)
        if speech < self.options.min_sparse_check_s:
            return None
        words = len(words_of(transcript.text))
        return "sparse" if words < self.options.min_words_per_speech_s * speech else None

    def max_prob(self, chunk: Chunk) -> float:
        window = self.probs[chunk.start // VAD_WINDOW: -(-chunk.end // VAD_WINDOW)]
        return float(window.max()) if window.size else 0.0

    def requests(self, batch: list[_Job]) -> list[DecodeRequest]:
        # padding="silence": padded decodes encode only their audio (see DecodeRequest).
        return [DecodeRequest(audio=self.audio[j.chunk.start:j.chunk.end], options=j.options,
                              tag=j.chunk, timestamps=j.timestamps, padding="silence")
                for j in batch]

    def judge_wave(self, wave: list[list[_Job]], decoded: list[list[Transcript]]) -> None:
        """Judge a wave's results in batch order; follow-ups go to the front of the queue."""
        follow_ups: list[_Job] = []
        for batch, transcripts in zip(wave, decoded, strict=True):
            for job, transcript in zip(batch, transcripts, strict=True):
                self.counts[f"path_{transcript.extra.get('path', 'unknown')}"] += 1
                follow_ups.extend(self.judge(job, transcript))
        self.pending.extendleft(reversed(follow_ups))

    def judge(self, job: _Job, transcript: Transcript) -> list[_Job]:
        """Accept, retry, split or give up on one decoded chunk; returns follow-up jobs."""
        policy = self.options.retry
        seconds = job.chunk.seconds
        greedy = retry.is_greedy(job.options)
        flags = retry.chunk_flags(transcript, seconds, self.max_prob(job.chunk), policy,
                                  greedy=greedy)
        step = retry.verdict(flags, job.step, seconds, policy, greedy=greedy)
        if flags:
            log.info("chunk %.1f-%.1f s failed %s at step %s -> %s", job.chunk.start / SAMPLE_RATE,
                     job.chunk.end / SAMPLE_RATE, ",".join(flags), job.step.name, step.value)
        if step is Verdict.RETRY_BEAM:
            self.counts["retried_beam"] += 1
            return [dataclasses.replace(job, step=Step.BEAM,
                                        options=retry.beam_options(job.options, policy))]
        if step is Verdict.RETRY_HOTTER:
            self.counts["retried_hotter"] += 1
            return [_Job(job.chunk, Step.HOTTER, retry.hotter_options(job.options, policy))]
        if step is Verdict.SPLIT:
            self.counts["split"] += 1
            return self.split(job)
        if step is Verdict.GIVE_UP:
            transcript, dropped = retry.give_up(transcript, flags)
            self.counts["dropped" if dropped else "flagged"] += 1
            if dropped:
                self.dropped.append({"start": job.chunk.start, "end": job.chunk.end,
                                     "flags": list(flags)})
            self.results.append(ChunkResult(job.chunk, transcript, () if dropped else flags))
            return []
        reason = self.timed_redecode_reason(job, transcript)
        if reason is not None:
            self.counts[f"{reason}_redecoded"] += 1
            return [dataclasses.replace(job, timestamps=True)]
        transcript, follow_ups = self.continuation(job, transcript)
        self.results.append(ChunkResult(job.chunk, transcript))
        return follow_ups

    def split(self, job: _Job) -> list[_Job]:
        chunk = job.chunk
        max_len = chunk.samples * 3 // 5  # the cut lands between 30 % and 60 % of the chunk
        options = dataclasses.replace(self.options.decode, short_context=False)
        return [_Job(Chunk(start, end), Step.SPLIT, options)
                for start, end in split_at_quiet(self.probs, chunk.start, chunk.end, max_len)]

    def continuation(self, job: _Job, transcript: Transcript) -> tuple[Transcript, list[_Job]]:
        """Whisper's seek, driven by VAD: when the text skipped speech (stopped early, or left a
        hole), keep the text before the hole and decode again from there.

        Returns the transcript to keep and the follow-up job (if any). When nothing precedes the
        hole, only the hole itself is decoded and the whole transcript is kept.
        """
        opts = self.options
        if (not opts.continue_early_end or not transcript.text
                or job.continuations >= opts.max_continuations):
            return transcript, []
        chunk = job.chunk
        first = chunk.start // VAD_WINDOW
        speech = self.probs[first: -(-chunk.end // VAD_WINDOW)] >= opts.chunking.threshold
        offset = chunk.start - first * VAD_WINDOW  # the chunk need not start on a window edge
        spans = [(a + offset, b + offset) for a, b in text_spans(transcript)]
        hole = first_uncovered_speech(
            speech, VAD_WINDOW, spans, tolerance=SAMPLE_RATE // 2,
            min_speech=int(opts.min_tail_speech_s * SAMPLE_RATE), bridge=SAMPLE_RATE // 3)
        if hole is None:
            return transcript, []
        hole_start = max(0, hole[0] - offset - SAMPLE_RATE // 5)
        kept = _before(transcript, hole_start)
        resume = covered_until(kept)
        if kept.segments and chunk.samples - resume >= SAMPLE_RATE // 2:
            self.counts["continued"] += 1
            # Back off a little: word end times are approximate; stitching drops duplicates.
            new = Chunk(chunk.start + max(0, resume - SAMPLE_RATE // 10), chunk.end)
            return kept, [_Job(new, Step.FIRST, job.options, job.continuations + 1,
                               job.timestamps)]
        hole_end = min(chunk.samples, hole[1] - offset + SAMPLE_RATE // 5)
        if hole_end - hole_start < SAMPLE_RATE // 2 or hole_end - hole_start >= chunk.samples:
            return transcript, []
        self.counts["filled"] += 1
        fill = Chunk(chunk.start + hole_start, chunk.start + hole_end)
        return transcript, [_Job(fill, Step.FIRST, job.options, job.continuations + 1,
                                 job.timestamps)]


def _before(transcript: Transcript, limit: int) -> Transcript:
    """The transcript's segments that end by ``limit`` (chunk-relative samples)."""
    kept = tuple(s for s in transcript.segments if s.end <= limit and s.text.strip())
    return dataclasses.replace(transcript, segments=kept)


def transcribe_long(
    audio: Audio | Any,
    runner_or_transcriber: Any,
    options: LongFormOptions | DecodeOptions | None = None,
    *,
    batch_size: int | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> Transcript:
    """Transcribe a whole 16 kHz mono recording; segments come back on the file's timeline.

    ``runner_or_transcriber``: a batch runner (``decode_batch``), a ``FasterWhisperTranscriber``
    (its model is wrapped in a ``Ct2WhisperRunner``) or any ``Transcriber``. The two leading
    arguments may also come in (backend, audio) order, as the CLI passes them.
    ``progress(done_samples, total_samples)`` is called after every wave of batches;
    ``cancel.is_set()`` is checked before every wave, and a cancelled run returns what was
    decoded so far with ``extra["cancelled"] = True``. A runner with ``streams`` > 1 decodes
    that many batches at the same time, on threads that end with this call.
    """
    if isinstance(runner_or_transcriber, np.ndarray) and not isinstance(audio, np.ndarray):
        audio, runner_or_transcriber = runner_or_transcriber, audio
    audio = np.ascontiguousarray(audio, dtype=np.float32)
    if audio.ndim != 1:
        raise ValueError("audio must be mono: a 1-D array of 16 kHz samples")
    started = time.perf_counter()
    opts = LongFormOptions.coerce(options)
    runner = as_runner(runner_or_transcriber)
    total = int(len(audio))
    size = batch_size or choose_batch_size(runner_device(runner),
                                           free_memory_bytes=free_memory_bytes())
    if size < 1:
        raise ValueError("batch_size must be >= 1")
    if progress is not None:
        progress(0, total)
    # VAD runs before any decode, so it may use every core (scored in parallel parts).
    probs = speech_probabilities(audio, workers=min(4, os.cpu_count() or 1))
    chunks = plan_chunks(probs, total, opts.chunking)
    run = _Run(audio, probs, opts)
    run.pending.extend(_Job(c, Step.FIRST, opts.decode, timestamps=not opts.text_only_first)
                       for c in chunks)
    streams = decode_streams(runner)
    cancelled = _drain(run, runner, size, streams, progress, cancel)
    segments = stitch(run.results)
    elapsed = time.perf_counter() - started
    log.info("long-form: %.1f s audio, %d chunks, %.2f s (%s)", total / SAMPLE_RATE, len(chunks),
             elapsed, dict(run.counts))
    language = opts.decode.language or _first_language(run.results)
    extra: dict[str, object] = {
        "engine": "longform", "chunks": len(chunks), "batch_size": size, "streams": streams,
        "cancelled": cancelled, "dropped": run.dropped, **dict(run.counts),
    }
    return Transcript(segments=tuple(segments), language=language, duration=total,
                      decode_ms=elapsed * 1000, extra=extra)


def _drain(run: _Run, runner: BatchRunner, size: int, streams: int,
           progress: ProgressCallback | None, cancel: CancelToken | None) -> bool:
    """Decode the queue wave by wave; True when stopped by ``cancel``. One batch of a wave runs
    on the calling thread, the others on a pool of ``streams - 1`` threads."""
    total = len(run.audio)
    pool = ThreadPoolExecutor(streams - 1, "longform") if streams > 1 else None
    reported = 0
    try:
        while run.pending:
            if cancel is not None and cancel.is_set():
                log.info("long-form: cancelled with %d chunk jobs left", len(run.pending))
                return True
            wave = _next_wave(run.pending, size, streams, run.options.lookahead_batches)
            requests = [run.requests(batch) for batch in wave]
            others = [pool.submit(runner.decode_batch, r) for r in requests[1:]] if pool else []
            decoded = [runner.decode_batch(requests[0]), *(f.result() for f in others)]
            run.judge_wave(wave, decoded)
            # Everything before the earliest unfinished job is done (silence included).
            frontier = min((j.chunk.start for j in run.pending), default=total)
            reported = max(reported, frontier)
            if progress is not None:
                progress(reported, total)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)  # no decode may outlive the call (an error in another)
    return False


def _next_wave(pending: deque[_Job], size: int, streams: int, lookahead: int
               ) -> list[list[_Job]]:
    """Up to ``streams`` batches of at most ``size`` jobs. A short queue is shared out evenly,
    so no stream idles while another decodes a full batch."""
    per_stream = min(size, -(-len(pending) // streams))
    return [_next_batch(pending, per_stream, lookahead) for _ in range(streams) if pending]


def _next_batch(pending: deque[_Job], size: int, lookahead: int) -> list[_Job]:
    """Up to ``size`` jobs: the oldest, plus those of the next ``lookahead`` batches closest to
    it in length. A batch is generated at its longest item's width (and encoded at it on
    CUDA), so similar lengths waste less; always taking the oldest job keeps progress moving
    along the file."""
    window = [pending[i] for i in range(min(len(pending), size * lookahead))]
    anchor = window[0]
    chosen = sorted(window[1:], key=lambda j: abs(j.chunk.samples - anchor.chunk.samples))
    batch = [anchor, *chosen[:size - 1]]
    for job in batch:
        pending.remove(job)
    return batch


def _first_language(results: list[ChunkResult]) -> str | None:
    for result in results:
        if result.transcript.language:
            return result.transcript.language
    return None
