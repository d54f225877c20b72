"""The long-recording pipeline: VAD chunks -> batched decodes -> checks/retries -> one timeline.

Work is a queue of chunk jobs in file order. Each round (a *wave*) takes up to ``batch_size`` jobs
per decode stream and hands each stream's batch to the runner as one ``decode_batch`` call (one
batched CTranslate2 generate), all streams at the same time. A stream is a model replica
(`Ct2Runner(streams=2)` on the CPU: two replicas of one thread each, sharing the
weights); CTranslate2 releases the GIL, so plain threads keep both cores busy. Two one-thread
streams beat one two-thread stream because a decoder step is too small to split well over two
cores (figures: docs/evidence.md). After a wave, every result is judged in batch order
(`engine.longform.retry`), so the outcome does not depend on which stream finished first:
accepted, re-decoded hotter, split, or given up on; follow-up jobs go to the front of the queue
so progress keeps moving along the file.

First decodes are text-only (no timestamp tokens: fewer tokens and cheaper steps, for less CPU
than timed first decodes at the same or a better WER, with fewer errors at chunk borders). Two
weaknesses of text-only decoding are sent back for a timed decode: a chunk whose text is too
short for the speech VAD heard in it (Whisper stopped early, and a text-only decode cannot say
where), and text that says a phrase twice back to back (spontaneous speech loops more often
without timestamps, and mixed speech reads worse without this check). A timed decode that
stops early (text ends while VAD still hears speech in the rest of the chunk) gets a
*continuation* job for the undecoded tail, like Whisper's own seek loop; the border duplicates
that may create are removed when stitching.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections import Counter, deque
from dataclasses import dataclass, field

import numpy as np

from engine.core.prompt import PromptTracker
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
from engine.longform.runners import choose_batch_size, free_memory_bytes
from engine.longform.stitch import (
    ChunkResult,
    covered_until,
    first_uncovered_speech,
    text_spans,
)
from engine.types import SAMPLE_RATE, Audio, DecodeOptions, DecodeRequest, Transcript

log = logging.getLogger(__name__)

PHRASE_SIZES = tuple(range(4, 13))  # phrases (in words) whose back-to-back repeat sends a chunk to timed

# Greedy, short-context decoding (first decodes text-only, see LongFormOptions): on tiny.en
# int8 it reads about as well as faster-whisper's beam-5 batched pipeline for a fraction of its
# CPU time (docs/evidence.md). Beam search mostly re-ranks near-identical hypotheses here, and short
# windows cost the encoder only what they hold, so that is where the time goes away.
DEFAULT_DECODE = DecodeOptions(beam_size=1, short_context=True, word_timestamps=True)
SEQUENTIAL_BEAM_SIZE = 5  # short files' decoder by default (LongFormOptions.for_beam)


@dataclass(frozen=True)
class LongFormOptions:
    """Everything `engine.files.transcribe_file` can be told (``FileOptions`` there).

    Attributes:
      decode: options of every chunk's first decode (greedy and short-context by default).
      chunking: how VAD speech is cut and packed: 18-24 s chunks, closed at the first pause
        after 18 s. Most of the words the pipeline lost were at chunk borders (a sentence's
        end cut off, a phrase said again across a border), so longer chunks read better; each
        decoder step attends over the whole window, so they cost more, and past 24 s the extra
        CPU outweighs the gain. The speed against faster-whisper's batched pipeline depends on
        the processor: where the encoder takes most of the CPU time (encoding is work the
        batched pipeline does too), greedy decoding saves less. Lower VAD thresholds win back
        part of whispered and falsetto speech but cost CPU and accuracy on plain reading, so
        the defaults stay. Figures per chunk length and processor, the peak RSS and the
        thresholds tried: docs/evidence.md.
      retry: hallucination thresholds and the retry ladder.
      continue_early_end: decode the tail of a chunk whose text stopped while speech went on.
      min_tail_speech_s: how much VAD speech the undecoded tail must hold to be continued.
      max_continuations: continuation jobs allowed per original chunk (bounds the work).
      lookahead_batches: how far ahead of the oldest job a batch may pick similar-length jobs.
      text_only_first: decode chunks without timestamp tokens first (see the module notes).
      min_words_per_speech_s: a text-only decode with fewer words per second of VAD speech is
        decoded again with timestamps. Read speech runs at 2.5-3 words/s, and the chunks
        Whisper cut short fall below this while few others do (docs/evidence.md).
      min_sparse_check_s: chunks with less VAD speech than this are not judged by word rate.
      batch_size: chunks per decode call and stream (None: `choose_batch_size` for the device).
      first_batch: when set, the first wave's batch per stream; each wave doubles it up to
        ``batch_size``. Text is final only wave by wave, so one full first wave (32 chunks on
        two CPU streams: over 5 minutes of speech) shows nothing until it ends; the app's
        import starts at 1, so its first text shows within a second or two. None (default)
        keeps every wave full, so a whole-file run does not pay the ramp's extra CPU time
        (figures: docs/evidence.md).
      sequential_below_s: files shorter than this are decoded by the sequential decoder
        (faster-whisper's own 30 s loop) when the caller gives one to `transcribe_file`: it
        reads short clips markedly better than this pipeline, while on a long reading the
        pipeline is at par and faster (docs/evidence.md).
      sequential_beam_size: the sequential decoder's beam for short files (None: ``decode``'s).
        `for_beam` sets it for the command line.
      previous_text: each section is cut into ``lanes_per_stream`` x streams *lanes*,
        contiguous runs of chunks; a wave decodes the next job of every lane, so each chunk's
        first decode comes after the chunk before it in its lane and carries that text as its
        prompt, as Whisper's own loop does (``condition_on_previous_text``), guarded as the
        live prompt is (`engine.core.prompt.PromptTracker`: only checked text that kept its
        form, at most 200 characters, forgotten after 20 s without speech). Off by default:
        on the long readings it gave no steady WER gain at any chunk length tried, and its
        smaller waves cost more CPU time (docs/evidence.md).
      lanes_per_stream: lanes per decode stream when ``previous_text`` is on: a stream's
        batch holds at most this many chunks (the runner generates 4 at a time on the CPU
        anyway, `engine.asr.CPU_DECODE_SLICE`), and the fewer the lanes, the more
        chunks follow one in their lane and get a prompt.
    """

    decode: DecodeOptions = DEFAULT_DECODE
    chunking: ChunkingOptions = field(
        default_factory=lambda: ChunkingOptions(target_chunk_s=18.0, max_chunk_s=24.0))
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    continue_early_end: bool = True
    min_tail_speech_s: float = 0.5
    max_continuations: int = 2
    lookahead_batches: int = 3
    text_only_first: bool = True
    min_words_per_speech_s: float = 2.2
    min_sparse_check_s: float = 2.0
    batch_size: int | None = None
    first_batch: int | None = None
    sequential_below_s: float = 120.0
    sequential_beam_size: int | None = None
    previous_text: bool = False
    lanes_per_stream: int = 8

    def __post_init__(self) -> None:
        if self.sequential_beam_size is not None and self.sequential_beam_size < 1:
            raise ValueError("sequential_beam_size must be >= 1")
        if self.lanes_per_stream < 1:
            raise ValueError("lanes_per_stream must be >= 1")
        if any(n is not None and n < 1 for n in (self.batch_size, self.first_batch)):
            raise ValueError("batch_size and first_batch must be >= 1")
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

    @classmethod
    def for_beam(cls, options: DecodeOptions, beam_size: int | None) -> LongFormOptions:
        """`coerce`'s options with the beam ``sottovoce transcribe --beam-size`` asks for: the
        same on both engines, or by default (None) each engine's best: beam 5 for the
        sequential decoder (faster-whisper's default) and the pipeline's greedy first
        decodes, whose unsure chunks are decoded again at beam 5 (`retry.RetryPolicy`).

        Beam 5 on every first decode of the pipeline does not pay: it reads no better than
        greedy in nearly twice the wall time, and drops whole phrases where a beam ended a
        chunk early ("what the flaming", "mumbled Mister Verloc"). Its larger decode buffers
        do not make the peak RSS (figures: docs/evidence.md).
        """
        if beam_size is not None:
            return cls.coerce(dataclasses.replace(options, beam_size=beam_size))
        greedy = cls.coerce(dataclasses.replace(options, beam_size=DEFAULT_DECODE.beam_size))
        return dataclasses.replace(greedy, sequential_beam_size=SEQUENTIAL_BEAM_SIZE)


@dataclass(frozen=True)
class ChunkJob:
    chunk: Chunk
    step: Step
    options: DecodeOptions
    continuations: int = 0
    timestamps: bool = True
    lane: int = 0  # the contiguous run of chunks it belongs to (LongFormOptions.previous_text)


class FileRun:
    """One file's pipeline state: the job queue, finished chunk results and counters.

    The steps a driver calls (`engine.files` runs them on local threads; a cluster would fan
    the batches out instead): `next_wave` -> `requests` -> decode -> `judge_wave`, then
    `take_resolved` for the chunk results no later job can change, in file order.
    """

    def __init__(self, audio: Audio, probs: Probabilities, options: LongFormOptions) -> None:
        self.audio = audio
        self.probs = probs
        self.options = options
        self.results: list[ChunkResult] = []
        self.dropped: list[dict[str, object]] = []
        self.counts: Counter[str] = Counter()
        self.pending: deque[ChunkJob] = deque()
        self.chunks = 0  # planned chunks (follow-up jobs not counted)
        self._lanes: list[PromptTracker] = []  # one per lane, once laid out

    def next_wave(self, size: int, streams: int) -> list[list[ChunkJob]]:
        """Up to ``streams`` batches of at most ``size`` jobs each, taken off the queue."""
        if not self.options.previous_text:
            return _next_wave(self.pending, size, streams, self.options.lookahead_batches)
        if not self._lanes:
            self._lay_out_lanes(streams * self.options.lanes_per_stream)
        return self._next_lane_wave(size, streams)

    def _lay_out_lanes(self, lanes: int) -> None:
        """The queued first decodes (file order) cut into ``lanes`` contiguous runs of about
        equal audio; each lane gets a prompt tracker."""
        jobs = list(self.pending)
        total = sum(j.chunk.samples for j in jobs) or 1
        lanes = max(1, min(lanes, len(jobs)))
        laid, done = [], 0
        for job in jobs:
            laid.append(dataclasses.replace(job, lane=min(lanes - 1, done * lanes // total)))
            done += job.chunk.samples
        self.pending = deque(laid)
        self._lanes = [PromptTracker(language=self.options.decode.language)
                       for _ in range(lanes)]

    def _next_lane_wave(self, size: int, streams: int) -> list[list[ChunkJob]]:
        """The next job of every lane (at most ``size`` x ``streams``): a lane's follow-ups
        (at the queue's front) before its next chunk, so a chunk is decoded once the one
        before it is settled. First decodes get their lane's prompt. Shared out over the
        streams by length (a call generates at its longest item's width)."""
        heads: list[ChunkJob] = []
        seen: set[int] = set()
        for job in self.pending:
            if job.lane not in seen:
                seen.add(job.lane)
                heads.append(job)
                if len(heads) == size * streams:
                    break
        for job in heads:
            self.pending.remove(job)
        heads = [self._prompted(job) for job in heads]
        heads.sort(key=lambda j: (j.chunk.samples, j.chunk.start))
        per = -(-len(heads) // streams)
        return [heads[i:i + per] for i in range(0, len(heads), per)]

    def _prompted(self, job: ChunkJob) -> ChunkJob:
        if job.step is not Step.FIRST or job.options.prompt is not None:
            return job
        prompt = self._lanes[job.lane].prompt(job.chunk.start / SAMPLE_RATE)
        return dataclasses.replace(job, options=dataclasses.replace(job.options, prompt=prompt))

    def _heard(self, job: ChunkJob, result: ChunkResult) -> None:
        """A settled result's text offered to its lane's prompt (flagged text is not kept)."""
        if self._lanes:
            self._lanes[job.lane].add(result.transcript.text, at=job.chunk.end / SAMPLE_RATE,
                                      flags=result.flags, language=result.transcript.language)

    @property
    def frontier(self) -> int:
        """Where the earliest unfinished job starts: the file before it is done (silence
        included), since every follow-up job lies inside the job it came from."""
        return min((j.chunk.start for j in self.pending), default=len(self.audio))

    def take_resolved(self) -> list[ChunkResult]:
        """The leading results (in file order) that end by the frontier, removed from
        `results`. One that reaches past it may still get a continuation or fill inside it,
        and nothing after it is released before it."""
        frontier = self.frontier
        ordered = sorted(self.results, key=lambda r: (r.chunk.start, r.chunk.end))
        n = 0
        while n < len(ordered) and ordered[n].chunk.end <= frontier:
            n += 1
        self.results = ordered[n:]
        return ordered[:n]

    def speech_seconds(self, chunk: Chunk) -> float:
        window = self.probs[chunk.start // VAD_WINDOW: -(-chunk.end // VAD_WINDOW)]
        return float(np.count_nonzero(window >= self.options.chunking.threshold)) * (
            VAD_WINDOW / SAMPLE_RATE)

    def timed_redecode_reason(self, job: ChunkJob, transcript: Transcript) -> str | None:
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

    def requests(self, batch: list[ChunkJob]) -> list[DecodeRequest]:
        # padding="silence": padded decodes encode only their audio (see DecodeRequest).
        return [DecodeRequest(audio=self.audio[j.chunk.start:j.chunk.end],
                              options=_fitted(j.options),
                              tag=j.chunk, timestamps=j.timestamps, padding="silence")
                for j in batch]

    def judge_wave(self, wave: list[list[ChunkJob]], decoded: list[list[Transcript]]) -> None:
        """Judge a wave's results in batch order; follow-ups go to the front of the queue."""
        follow_ups: list[ChunkJob] = []
        for batch, transcripts in zip(wave, decoded, strict=True):
            for job, transcript in zip(batch, transcripts, strict=True):
                self.counts[f"path_{transcript.extra.get('path', 'unknown')}"] += 1
                follow_ups.extend(self.judge(job, transcript))
        self.pending.extendleft(reversed(follow_ups))

    def judge(self, job: ChunkJob, transcript: Transcript) -> list[ChunkJob]:
        """Accept, retry, split or give up on one decoded chunk; returns follow-up jobs."""
        policy = self.options.retry
        seconds = job.chunk.seconds
        greedy = retry.is_greedy(job.options)
        flags = retry.chunk_flags(transcript, seconds, self.max_prob(job.chunk), policy,
                                  greedy=greedy, hotwords=job.options.hotwords)
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
            return [ChunkJob(job.chunk, Step.HOTTER, retry.hotter_options(job.options, policy),
                             lane=job.lane)]
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
            self._heard(job, self.results[-1])
            return []
        reason = self.timed_redecode_reason(job, transcript)
        if reason is not None:
            self.counts[f"{reason}_redecoded"] += 1
            return [dataclasses.replace(job, timestamps=True)]
        transcript, follow_ups = self.continuation(job, transcript)
        self.results.append(ChunkResult(job.chunk, transcript))
        self._heard(job, self.results[-1])
        return follow_ups

    def split(self, job: ChunkJob) -> list[ChunkJob]:
        chunk = job.chunk
        max_len = chunk.samples * 3 // 5  # the cut lands between 30 % and 60 % of the chunk
        options = dataclasses.replace(self.options.decode, short_context=False)
        return [ChunkJob(Chunk(start, end), Step.SPLIT, options, lane=job.lane)
                for start, end in split_at_quiet(self.probs, chunk.start, chunk.end, max_len)]

    def continuation(self, job: ChunkJob, transcript: Transcript) -> tuple[Transcript, list[ChunkJob]]:
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
            return kept, [ChunkJob(new, Step.FIRST, job.options, job.continuations + 1,
                               job.timestamps, job.lane)]
        hole_end = min(chunk.samples, hole[1] - offset + SAMPLE_RATE // 5)
        if hole_end - hole_start < SAMPLE_RATE // 2 or hole_end - hole_start >= chunk.samples:
            return transcript, []
        self.counts["filled"] += 1
        fill = Chunk(chunk.start + hole_start, chunk.start + hole_end)
        return transcript, [ChunkJob(fill, Step.FIRST, job.options, job.continuations + 1,
                                 job.timestamps, job.lane)]


def _before(transcript: Transcript, limit: int) -> Transcript:
    """The transcript's segments that end by ``limit`` (chunk-relative samples)."""
    kept = tuple(s for s in transcript.segments if s.end <= limit and s.text.strip())
    return dataclasses.replace(transcript, segments=kept)


def _fitted(options: DecodeOptions) -> DecodeOptions:
    """A chunk decoded with a vocabulary takes the padded window: there the whole list fits
    and helps (more names right, a lower WER), while on the short window it made chunks say a
    sentence twice or lose their first words (docs/evidence.md)."""
    if not options.hotwords:
        return options
    return dataclasses.replace(options, short_context=False)


def plan_file(audio: Audio, options: LongFormOptions) -> FileRun:
    """Step 1 of a file: VAD over the whole file, chunks planned, first decode jobs queued.

    VAD runs before any decode, so it may use every core (scored in parallel parts)."""
    probs = speech_probabilities(audio, workers=vad_workers())
    return plan_section(audio, probs, options)


def vad_workers() -> int:
    return min(4, os.cpu_count() or 1)


def plan_section(audio: Audio, probs: Probabilities, options: LongFormOptions) -> FileRun:
    """`plan_file` with the VAD already done (``probs``: one per window of ``audio``): a
    section of a long file (`engine.longform.sections`) or a whole one."""
    chunks = plan_chunks(probs, len(audio), options.chunking)
    run = FileRun(audio, probs, options)
    run.chunks = len(chunks)
    run.pending.extend(ChunkJob(c, Step.FIRST, options.decode,
                                timestamps=not options.text_only_first) for c in chunks)
    return run


def batch_size_for(device: str, asked: int | None) -> int:
    """Chunks per decode call: ``asked``, else what suits ``device`` and the free memory."""
    size = asked or choose_batch_size(device, free_memory_bytes=free_memory_bytes())
    if size < 1:
        raise ValueError("batch_size must be >= 1")
    return size


def _next_wave(pending: deque[ChunkJob], size: int, streams: int, lookahead: int
               ) -> list[list[ChunkJob]]:
    """Up to ``streams`` batches of at most ``size`` jobs. A short queue is shared out evenly,
    so no stream idles while another decodes a full batch."""
    per_stream = min(size, -(-len(pending) // streams))
    return [_next_batch(pending, per_stream, lookahead) for _ in range(streams) if pending]


def _next_batch(pending: deque[ChunkJob], size: int, lookahead: int) -> list[ChunkJob]:
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
