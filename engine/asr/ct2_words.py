"""Turn Whisper output tokens into timed segments and words (pure helpers of the CT2 decoder).

Token ids at or above ``timestamp_begin`` are timestamps in 20 ms steps from the start of the
decoded window; ids below ``eot`` are text. The splitting follows faster-whisper's
``_split_segments_by_timestamps`` for one window, except that an unfinished last segment (text
after the last timestamp pair, which faster-whisper would re-decode from a new seek point) is
kept and ends at the end of the audio: a chunk is decoded exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

TIME_PRECISION_S = 0.02  # one timestamp token step
TOKENS_PER_SECOND = 50  # encoder positions per second (alignment time unit)
SENTENCE_END_MARKS = ".。!！?？"


@dataclass(frozen=True)
class TokenSpan:
    """A run of tokens between two timestamps; times in seconds from the window start."""

    start_s: float
    end_s: float
    tokens: tuple[int, ...]


@dataclass(frozen=True)
class WordTiming:
    """One aligned word; times in seconds from the window start."""

    text: str
    start_s: float
    end_s: float
    probability: float
    token_count: int


def split_spans(
    tokens: Sequence[int], timestamp_begin: int, eot: int, duration_s: float
) -> list[TokenSpan]:
    """Split one window's generated tokens into timed spans (text tokens only in each span)."""
    tokens = list(tokens)
    cuts = [i for i in range(1, len(tokens))
            if tokens[i] >= timestamp_begin and tokens[i - 1] >= timestamp_begin]
    spans: list[TokenSpan] = []
    last = 0

    def ts(token: int) -> float:
        return min((token - timestamp_begin) * TIME_PRECISION_S, duration_s)

    for cut in cuts:
        piece = tokens[last:cut]
        spans.append(TokenSpan(ts(piece[0]), ts(piece[-1]), _text(piece, eot)))
        last = cut
    rest = tokens[last:]
    text = _text(rest, eot)
    if text:
        stamps = [t for t in rest if t >= timestamp_begin]
        start = ts(stamps[0]) if stamps and rest[0] >= timestamp_begin else (
            spans[-1].end_s if spans else 0.0)
        end = ts(stamps[-1]) if len(stamps) >= 2 and rest[-1] >= timestamp_begin else duration_s
        spans.append(TokenSpan(start, max(start, end), text))
    return [s for s in spans if s.tokens]


def _text(tokens: Sequence[int], eot: int) -> tuple[int, ...]:
    return tuple(t for t in tokens if t < eot)


def word_timings(
    words: Sequence[str],
    word_tokens: Sequence[Sequence[int]],
    text_indices: Sequence[int],
    time_indices: Sequence[int],
    token_probs: Sequence[float],
) -> list[WordTiming]:
    """Word times from a cross-attention alignment (as faster-whisper's ``find_alignment``).

    ``words``/``word_tokens`` come from the tokenizer's ``split_to_word_tokens`` over the text
    tokens plus EOT; the alignment path gives, per step, a text index and a time index.
    """
    if len(word_tokens) <= 1 or not len(text_indices):
        return []
    boundaries = np.pad(np.cumsum([len(t) for t in word_tokens[:-1]]), (1, 0))
    jumps = np.pad(np.diff(np.asarray(text_indices)), (1, 0), constant_values=1).astype(bool)
    jump_times = np.asarray(time_indices)[jumps] / TOKENS_PER_SECOND
    if len(jump_times) < len(boundaries):
        return []  # a degenerate alignment path: no usable word times
    starts = jump_times[boundaries[:-1]]
    ends = jump_times[boundaries[1:]]
    probs = np.asarray(token_probs, dtype=np.float64)
    return [
        WordTiming(word, float(s), float(e),
                   float(np.mean(probs[i:j])) if j > i and len(probs) >= j else 0.0, len(toks))
        for word, toks, s, e, i, j in zip(
            words, word_tokens, starts, ends, boundaries[:-1], boundaries[1:], strict=False)
    ]


def clip_long_words(timings: list[WordTiming]) -> list[WordTiming]:
    """Cap the first word, and words at sentence ends, to twice the median word duration
    (faster-whisper's own hacks: the alignment stretches words next to a pause)."""
    durations = np.array([w.end_s - w.start_s for w in timings])
    durations = durations[durations.nonzero()]
    if not len(durations):
        return timings
    median = min(0.7, float(np.median(durations)))
    max_duration = 2 * median
    out = list(timings)
    first = out[0]
    # The first word after the start of a window tends to absorb leading silence.
    if first.end_s > 4 * median and first.end_s - first.start_s > max_duration:
        out[0] = WordTiming(first.text, max(0.0, first.end_s - max_duration), first.end_s,
                            first.probability, first.token_count)
    for i in range(1, len(out)):
        w = out[i]
        if w.end_s - w.start_s <= max_duration:
            continue
        if w.text in SENTENCE_END_MARKS:
            out[i] = WordTiming(w.text, w.start_s, w.start_s + max_duration, w.probability,
                                w.token_count)
        elif out[i - 1].text in SENTENCE_END_MARKS:
            out[i] = WordTiming(w.text, w.end_s - max_duration, w.end_s, w.probability,
                                w.token_count)
    return out


def assign_to_spans(timings: Sequence[WordTiming], spans: Sequence[TokenSpan]
                    ) -> list[list[WordTiming]]:
    """Distribute words over spans by token count, as faster-whisper does; empty words (merged
    punctuation) are dropped but their tokens still count."""
    out: list[list[WordTiming]] = []
    index = 0
    for span in spans:
        words: list[WordTiming] = []
        used = 0
        while index < len(timings) and used < len(span.tokens):
            timing = timings[index]
            if timing.text:
                words.append(timing)
            used += timing.token_count
            index += 1
        out.append(words)
    return out
