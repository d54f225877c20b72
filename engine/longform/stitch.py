"""Put per-chunk transcripts back on the file's timeline, in order, without border duplicates.

Each chunk was decoded on its own, so its segment and word times are relative to the chunk
start. `place` shifts them by the chunk offset and clamps them inside the chunk; `stitch` orders
all chunks, drops words repeated across a border (a continuation chunk that starts a little
early re-reads the last words of the previous one), and makes times monotonic so subtitle and
JSON exporters can rely on ``prev.end <= next.start``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine.core.quality import words_of
from engine.longform.chunking import Chunk
from engine.types import SAMPLE_RATE, Segment, Transcript, Word

# A repeated word run at a border only counts as a duplicate when the second copy starts
# within this distance of the end of the first: far apart, it is a real repetition in speech.
DUPLICATE_WINDOW = int(1.5 * SAMPLE_RATE)
MAX_BORDER_WORDS = 8
SENTENCE_END_MARKS = (".", "?", "!", "。", "？", "！")
# A sentence piece needs this many words before it may be cut off ("Mr. Quilter" stays whole).
MIN_SENTENCE_WORDS = 3
# A segment placed at or past its chunk's end (audio that stops mid-word: Whisper times the cut
# word at or after the end) is given the chunk's last moments, up to this long, not zero length.
CUT_TAIL = SAMPLE_RATE // 2


@dataclass(frozen=True)
class ChunkResult:
    """The accepted decode of one chunk; ``flags`` are the quality checks it still fails."""

    chunk: Chunk
    transcript: Transcript
    flags: tuple[str, ...] = ()


def place(result: ChunkResult) -> list[Segment]:
    """The chunk's segments on the file timeline, clamped to the chunk, flags attached; each
    has a positive length (one timed at or past the chunk's end takes its last moments)."""
    lo, hi = result.chunk.start, result.chunk.end
    placed = []
    for seg in result.transcript.segments:
        if not seg.text.strip():
            continue
        start, end = _within(lo + seg.start, lo, hi), _within(lo + seg.end, lo, hi)
        w_lo = lo
        if end <= start:
            start, end = max(lo, min(start, hi - CUT_TAIL)), hi
            w_lo = start  # its words, cut off too, go in the same last moments
        words = tuple(dataclasses.replace(
            w, start=_within(lo + w.start, w_lo, hi),
            end=max(_within(lo + w.start, w_lo, hi), _within(lo + w.end, w_lo, hi)))
            for w in seg.words)
        flags = tuple(dict.fromkeys(seg.flags + result.flags))
        placed.extend(split_at_sentences(dataclasses.replace(
            seg, start=start, end=end, words=words, flags=flags)))
    return placed


def _within(t: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, t))


def split_at_sentences(segment: Segment) -> list[Segment]:
    """``segment`` cut after each word that ends a sentence (needs word times).

    A text-only decode comes back as one segment per chunk (18-24 s); cut at sentence ends it
    reads like Whisper's own timed segments in the JSON and the transcript view. Each piece
    keeps the segment's statistics and flags.
    """
    words = segment.words
    pieces: list[list[Word]] = [[]]
    for i, word in enumerate(words):
        pieces[-1].append(word)
        ends = word.text.rstrip().endswith(SENTENCE_END_MARKS)
        if ends and len(pieces[-1]) >= MIN_SENTENCE_WORDS and i < len(words) - 1:
            pieces.append([])
    if len(pieces) == 1:
        return [segment]
    last = len(pieces) - 1
    return [dataclasses.replace(
        segment, text="".join(w.text for w in piece), words=tuple(piece),
        start=segment.start if k == 0 else piece[0].start,
        end=segment.end if k == last else piece[-1].end) for k, piece in enumerate(pieces)]


def stitch(results: Iterable[ChunkResult]) -> list[Segment]:
    """All chunk results as one ordered, monotonic, border-deduplicated segment list."""
    return Stitcher().add(results)


class Stitcher:
    """Stitching as chunk results become final, in file order: `add` returns the new segments,
    the same ones (split the same way) that stitching every result at once would give.

    Why nothing needs holding back: border de-duplication only trims the *incoming* chunk's
    leading words against the last two segments placed, which it keeps; the monotonic floor is
    the last segment's end. Callers add results whose chunks end before any later result
    starts (`FileRun.take_resolved`), so no later segment sorts before one already returned.
    """

    def __init__(self) -> None:
        self._tail: list[Segment] = []  # the last placed segments, before ordering/monotonic
        self._floor = 0

    def add(self, results: Iterable[ChunkResult]) -> list[Segment]:
        new: list[Segment] = []
        for result in sorted(results, key=lambda r: (r.chunk.start, r.chunk.end)):
            incoming = place(result)
            if self._tail and incoming:
                incoming = drop_border_duplicates(self._tail, incoming)
            new.extend(incoming)
            self._tail = (self._tail + incoming)[-2:]
        # A fill chunk (speech a decode skipped) lies inside its parent chunk: order by time.
        new.sort(key=lambda s: s.start)
        out = make_monotonic(new, self._floor)
        if out:
            self._floor = out[-1].end
        return out


def drop_border_duplicates(before: Sequence[Segment], after: list[Segment]) -> list[Segment]:
    """``after`` without its leading words that repeat the trailing words of ``before``.

    Needs word timings: the repeated run must start close to where the previous text ended,
    otherwise "that that" across a real pause would be wrongly merged.
    """
    tail = [w for s in before[-2:] for w in s.words][-MAX_BORDER_WORDS:]
    head_seg = after[0]
    head = list(head_seg.words[:MAX_BORDER_WORDS])
    if not tail or not head or head[0].start - tail[-1].end > DUPLICATE_WINDOW:
        return after
    overlap = _overlap_length([_norm(w) for w in tail], [_norm(w) for w in head])
    if overlap == 0:
        return after
    kept = head_seg.words[overlap:]
    if not kept:
        return after[1:]
    text = "".join(w.text for w in kept)
    trimmed = dataclasses.replace(head_seg, text=text, words=kept, start=kept[0].start)
    return [trimmed, *after[1:]]


def _norm(word: Word) -> str:
    return " ".join(words_of(word.text))


def _overlap_length(tail: list[str], head: list[str]) -> int:
    """Longest n such that the last n of ``tail`` equal the first n of ``head`` (empty words
    never match)."""
    for n in range(min(len(tail), len(head)), 0, -1):
        if tail[-n:] == head[:n] and all(tail[-n:]):
            return n
    return 0


def make_monotonic(segments: list[Segment], floor: int = 0) -> list[Segment]:
    """Times never go backwards: each segment starts at or after the previous one's end (the
    first at or after ``floor``), and words inside a segment are ordered and within it. A
    segment left with no time at all (behind a previous one that reaches the chunk's end)
    joins that previous segment: a zero-length cue cannot be shown."""
    out: list[Segment] = []
    for seg in segments:
        start = max(seg.start, floor)
        words: list[Word] = []
        cursor = start
        for w in seg.words:
            w_start = max(w.start, cursor)
            w_end = max(w.end, w_start)
            words.append(dataclasses.replace(w, start=w_start, end=w_end))
            cursor = w_end
        end = max(seg.end, start, cursor)
        if end <= start and out:
            prev = out[-1]
            out[-1] = dataclasses.replace(
                prev, text=prev.text + seg.text, words=prev.words + tuple(words),
                end=max(prev.end, end), flags=tuple(dict.fromkeys(prev.flags + seg.flags)))
            continue
        out.append(dataclasses.replace(seg, start=start, end=end, words=tuple(words)))
        floor = end
    return out


def covered_until(transcript: Transcript) -> int:
    """Where, within its chunk, the decoded text ends (0 when there is none)."""
    ends = [s.end for s in transcript.segments if s.text.strip()]
    ends += [w.end for w in transcript.words]
    return max(ends, default=0)


def text_spans(transcript: Transcript) -> list[tuple[int, int]]:
    """Chunk-relative spans that carry text: words when timed, else segments."""
    if transcript.words:
        return [(w.start, w.end) for w in transcript.words]
    return [(s.start, s.end) for s in transcript.segments if s.text.strip()]


def first_uncovered_speech(
    speech: npt.NDArray[np.bool_], window: int, spans: list[tuple[int, int]], *,
    tolerance: int, min_speech: int, bridge: int,
) -> tuple[int, int] | None:
    """The first stretch of VAD speech no decoded text accounts for, chunk-relative in samples.

    ``speech`` marks the chunk's VAD windows (``window`` samples each) that hold speech; a window
    counts as covered within ``tolerance`` of any text span (word times and VAD edges are both
    approximate). Uncovered runs closer than ``bridge`` merge; the first holding at least
    ``min_speech`` samples of speech is returned as (start, end), else None.
    """
    covered = np.zeros(speech.shape, dtype=bool)
    for start, end in spans:
        lo = max(0, (start - tolerance) // window)
        hi = max(0, -(-(end + tolerance) // window))
        covered[lo:hi] = True
    hits = np.flatnonzero(speech & ~covered)
    if hits.size == 0:
        return None
    run_start, count, last = int(hits[0]), 0, int(hits[0])
    for i in hits:
        if (i - last) * window > bridge:
            run_start, count = int(i), 0
        count += 1
        last = int(i)
        if count * window >= min_speech:
            end = last + 1
            while end < speech.size and speech[end] and not covered[end]:
                end += 1
            return run_start * window, end * window
    return None
