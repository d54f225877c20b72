"""Transcript and caption exporters (TXT, SRT, WebVTT, JSON).

Sans-I/O: every function maps values to strings or strings to values; writing files is the
caller's job (see `engine.atomic`). Subtitle cues follow common readability rules (Netflix/BBC
style guides): at most 42 characters a line, at most 2 lines, at most 7 s on screen, lines broken
only between words and balanced in length. Word timings place the cue borders when a segment
has them; otherwise times are spread over the segment in proportion to word length.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.core.captions import CaptionLine, merge_lines
from engine.core.form import has_form
from engine.types import SAMPLE_RATE, Segment, Transcript, Word

FORMATS = ("txt", "srt", "vtt", "json")
JSON_FORMAT_NAME = "sottovoce-transcript"
JSON_VERSION = 1
_SAMPLES_PER_MS = SAMPLE_RATE // 1000
_SENTENCE_END = (".", "?", "!", "…", "。", "？", "！")
_CLAUSE_END = (",", ";", ":", "，", "、", "；", "：")
_SHORT_PAUSE = SAMPLE_RATE * 2 // 5
_PUNCTUATION_BONUS = 10  # characters of imbalance worth accepting to break a line at a comma


@dataclass(frozen=True)
class CueLayout:
    """Subtitle readability limits. Times are samples at 16 kHz.

    ``pause_split``: a silence this long between two words always starts a new cue, so a cue
    never stays on screen across a long pause. ``min_duration``: short cues are stretched to this
    (never into the next cue) so a one-word cue can still be read.
    """

    max_line_chars: int = 42
    max_lines: int = 2
    max_duration: int = 7 * SAMPLE_RATE
    min_duration: int = SAMPLE_RATE * 5 // 6
    pause_split: int = SAMPLE_RATE * 3 // 2

    def __post_init__(self) -> None:
        if self.max_line_chars < 8:
            raise ValueError("max_line_chars must be >= 8")
        if self.max_lines < 1:
            raise ValueError("max_lines must be >= 1")
        if self.max_duration <= 0 or self.pause_split <= 0:
            raise ValueError("max_duration and pause_split must be positive")
        if not 0 <= self.min_duration <= self.max_duration:
            raise ValueError("min_duration must be between 0 and max_duration")


@dataclass(frozen=True)
class Cue:
    """One subtitle: shown from ``start`` to ``end`` (samples), one string per screen line."""

    start: int
    end: int
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return " ".join(self.lines)


# ---------------------------------------------------------------- cue layout


def layout_cues(transcript: Transcript, layout: CueLayout | None = None) -> list[Cue]:
    """Split a transcript into readable cues; a cue never spans two segments."""
    lay = layout or CueLayout()
    cues: list[Cue] = []
    for segment in transcript.segments:
        words = _timed_words(segment, lay.max_line_chars)
        cues.extend(_segment_cues(words, lay))
    return _fix_times(cues, lay, transcript.duration)


def _timed_words(segment: Segment, max_chars: int) -> list[Word]:
    """The segment's words, stripped and non-empty, with a word longer than a line cut up."""
    words = [w for w in segment.words if w.text.strip()] or _spread_words(segment)
    out: list[Word] = []
    for w in words:
        text = w.text.strip()
        if len(text) <= max_chars:
            out.append(Word(text, w.start, w.end, w.probability))
            continue
        pieces = [text[i:i + max_chars] for i in range(0, len(text), max_chars)]
        span = w.end - w.start
        for i, piece in enumerate(pieces):
            out.append(Word(piece, w.start + span * i // len(pieces),
                            w.start + span * (i + 1) // len(pieces), w.probability))
    return out


def _spread_words(segment: Segment) -> list[Word]:
    """Word times for a segment without word timestamps, in proportion to character counts."""
    tokens = segment.text.split()
    total = sum(len(t) + 1 for t in tokens)
    span = max(0, segment.end - segment.start)
    words, done = [], 0
    for token in tokens:
        start = segment.start + span * done // total
        done += len(token) + 1
        words.append(Word(token, start, segment.start + span * done // total))
    return words


def _segment_cues(words: list[Word], lay: CueLayout) -> list[Cue]:
    """Greedy fill: add words while the cue still wraps into the allowed lines and time; when a
    cue is full, end it at its last clause or sentence break if it has a good one."""
    cues: list[Cue] = []
    current: list[Word] = []
    for word in words:
        while current:
            reason = _break_reason(current, word, lay)
            if reason is None:
                break
            keep = _best_split(current, lay) if reason == "full" else len(current)
            cues.append(_make_cue(current[:keep], lay))
            current = current[keep:]
        current.append(word)
    if current:
        cues.append(_make_cue(current, lay))
    return cues


def _break_reason(current: list[Word], word: Word, lay: CueLayout) -> str | None:
    """Why ``word`` cannot join the cue: "pause"/"sentence" (end it here), "full" (no room)."""
    if word.start - current[-1].end >= lay.pause_split:
        return "pause"
    if word.end - current[0].start > lay.max_duration:
        return "full"
    texts = [w.text for w in current] + [word.text]
    if wrap_lines(texts, lay.max_line_chars, lay.max_lines) is None:
        return "full"
    # A sentence end is a natural place to change cue once the cue is reasonably full.
    filled = len(" ".join(texts[:-1])) >= lay.max_line_chars * lay.max_lines // 2
    return "sentence" if filled and current[-1].text.endswith(_SENTENCE_END) else None


def _best_split(current: list[Word], lay: CueLayout) -> int:
    """How many words of a full cue to show now: up to the last sentence end, else the last
    clause mark (, ; :), else a short pause, provided the cue keeps at least half a line;
    otherwise all of them."""
    min_chars = lay.max_line_chars // 2
    best, best_score = len(current), 0
    for count in range(1, len(current)):
        if len(" ".join(w.text for w in current[:count])) < min_chars:
            continue
        last, following = current[count - 1], current[count]
        score = 0
        if last.text.endswith(_SENTENCE_END):
            score = 3
        elif last.text.endswith(_CLAUSE_END):
            score = 2
        elif following.start - last.end >= _SHORT_PAUSE:
            score = 1
        if score and score >= best_score:
            best, best_score = count, score
    return best


def _make_cue(words: list[Word], lay: CueLayout) -> Cue:
    lines = wrap_lines([w.text for w in words], lay.max_line_chars, lay.max_lines)
    if lines is None:  # only a single word can get here, and words were cut to fit a line
        lines = [" ".join(w.text for w in words)]
    return Cue(start=words[0].start, end=words[-1].end, lines=tuple(lines))


def wrap_lines(words: Sequence[str], width: int, max_lines: int) -> list[str] | None:
    """Break ``words`` into the fewest lines of at most ``width`` characters, balanced in length
    (a short last line looks odd on screen) and, for two lines, preferably broken after a
    punctuation mark; None when they need more than ``max_lines`` lines."""
    if not words:
        return []
    needed = _greedy(words, width)
    if needed is None or len(needed) > max_lines:
        return None
    if len(needed) == 2:
        return _best_two_lines(words, width)
    # Find the narrowest width that still gives the same number of lines.
    longest_word = max(len(w) for w in words)
    total = len(" ".join(words))
    for trial in range(max(longest_word, -(-total // len(needed))), width + 1):
        lines = _greedy(words, trial)
        if lines is not None and len(lines) <= len(needed):
            return lines
    return needed


def _best_two_lines(words: Sequence[str], width: int) -> list[str]:
    """The two-line break with the shortest longer line, counting a break after punctuation
    as if that line were a few characters shorter (reading follows the phrase)."""
    best: tuple[int, list[str]] | None = None
    for cut in range(1, len(words)):
        top, bottom = " ".join(words[:cut]), " ".join(words[cut:])
        if len(top) > width or len(bottom) > width:
            continue
        bonus = _PUNCTUATION_BONUS if top.endswith(_SENTENCE_END + _CLAUSE_END) else 0
        cost = max(len(top), len(bottom)) - bonus
        if best is None or cost < best[0]:
            best = (cost, [top, bottom])
    assert best is not None  # the greedy wrap already found a valid two-line break
    return best[1]


def _greedy(words: Sequence[str], width: int) -> list[str] | None:
    lines: list[str] = []
    for word in words:
        if len(word) > width:
            return None
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _fix_times(cues: list[Cue], lay: CueLayout, duration: int) -> list[Cue]:
    """Cues in order, never overlapping, each between min and max duration where room allows
    (the last one is not stretched past the end of the audio, when that is known)."""
    fixed: list[Cue] = []
    for i, cue in enumerate(cues):
        start = max(cue.start, fixed[-1].end if fixed else 0)
        end = min(max(cue.end, start), start + lay.max_duration)
        if end - start < lay.min_duration:
            if i + 1 < len(cues):
                limit = cues[i + 1].start
            else:
                limit = duration if duration > 0 else end + lay.min_duration
            end = max(end, min(start + lay.min_duration, limit))
        if end <= start:
            start, end = _make_room(fixed, start, lay)
        fixed.append(Cue(start, end, cue.lines))
    return fixed


def _make_room(fixed: list[Cue], at: int, lay: CueLayout) -> tuple[int, int]:
    """Times for a cue that would show for no time at all (words at the very end of the audio,
    or behind the previous cue's end): it ends at ``at`` and takes up to ``min_duration``
    before it, from the gap, else from the previous cue's second half."""
    floor = fixed[-1].end if fixed else 0
    start = max(floor, at - max(1, lay.min_duration))
    if start < at:
        return start, at
    if fixed and at - fixed[-1].start >= 2:
        prev = fixed[-1]
        start = max(prev.start + (at - prev.start) // 2, at - max(1, lay.min_duration))
        fixed[-1] = Cue(prev.start, start, prev.lines)
        return start, at
    return at, at + max(1, lay.min_duration)  # nothing before it to take time from


# ---------------------------------------------------------------- writers


def to_txt(transcript: Transcript) -> str:
    """Plain text, a line for each run of segments that ends a sentence: Whisper may cut a
    segment mid-sentence ("... can do for you" / "ask what you can do ..."), and where it does
    moves with the processor's kernels, so a line goes on until a segment ends a sentence."""
    lines: list[str] = []
    line: list[str] = []
    for segment in transcript.segments:
        if text := segment.text.strip():
            line.append(text)
            if has_form(text):
                lines.append(" ".join(line))
                line = []
    if line:
        lines.append(" ".join(line))
    return "".join(line + "\n" for line in lines)


def to_srt(transcript: Transcript, layout: CueLayout | None = None) -> str:
    blocks = [
        f"{n}\n{format_timestamp(c.start, ',')} --> {format_timestamp(c.end, ',')}\n"
        + "\n".join(c.lines) + "\n"
        for n, c in enumerate(layout_cues(transcript, layout), start=1)
    ]
    return "\n".join(blocks)


def to_vtt(transcript: Transcript, layout: CueLayout | None = None) -> str:
    blocks = ["WEBVTT\n"] + [
        f"{format_timestamp(c.start, '.')} --> {format_timestamp(c.end, '.')}\n"
        + "\n".join(_vtt_escape(line) for line in c.lines) + "\n"
        for c in layout_cues(transcript, layout)
    ]
    return "\n".join(blocks)


def to_json(transcript: Transcript) -> str:
    """Segments with word timings and quality statistics; times in seconds (exact: samples/16000)."""
    doc = {
        "format": JSON_FORMAT_NAME,
        "version": JSON_VERSION,
        "language": transcript.language,
        "duration": transcript.duration / SAMPLE_RATE,
        "decode_ms": round(transcript.decode_ms, 3),
        "text": transcript.text,
        "segments": [_segment_json(s) for s in transcript.segments],
        "extra": transcript.extra,
    }
    return json.dumps(doc, ensure_ascii=False, indent=1, default=str) + "\n"


def render(transcript: Transcript, fmt: str, layout: CueLayout | None = None) -> str:
    """The transcript in ``fmt`` (one of `FORMATS`)."""
    if fmt == "txt":
        return to_txt(transcript)
    if fmt == "srt":
        return to_srt(transcript, layout)
    if fmt == "vtt":
        return to_vtt(transcript, layout)
    if fmt == "json":
        return to_json(transcript)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def format_timestamp(samples: int, decimal_mark: str) -> str:
    """HH:MM:SS,mmm (SRT) or HH:MM:SS.mmm (VTT), rounded to the millisecond."""
    ms = (max(0, samples) + _SAMPLES_PER_MS // 2) // _SAMPLES_PER_MS
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    seconds, ms = divmod(ms, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{decimal_mark}{ms:03d}"


def _segment_json(s: Segment) -> dict[str, Any]:
    return {
        "start": s.start / SAMPLE_RATE, "end": s.end / SAMPLE_RATE, "text": s.text,
        "avg_logprob": s.avg_logprob, "no_speech_prob": s.no_speech_prob,
        "compression_ratio": s.compression_ratio, "temperature": s.temperature,
        "flags": list(s.flags),
        "words": [{"text": w.text, "start": w.start / SAMPLE_RATE, "end": w.end / SAMPLE_RATE,
                   "probability": w.probability} for w in s.words],
    }


def _vtt_escape(line: str) -> str:
    # Escaping ">" also keeps "-->", which would end a cue payload, out of the text.
    return line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# ---------------------------------------------------------------- captions

def export_captions(lines: Sequence[CaptionLine], fmt: str, *, labels: bool = True,
                    timestamps: bool = True, translations: bool = True) -> str:
    """A caption transcript in ``fmt``. SRT and VTT always carry times (a cue is its times);
    ``timestamps`` False leaves them out of TXT and JSON. ``labels`` prefixes each line with its
    source ("You: ..."). Lines are merged where one continues the other (`merge_lines`)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    merged = merge_lines(lines)

    def text(line: CaptionLine) -> str:
        said = line.labelled() if labels else line.text
        return f"{said}\n{line.translation}" if translations and line.translation else said

    if fmt == "json":
        rows = []
        for line in merged:
            row: dict[str, object] = {"text": line.text, "language": line.language}
            if labels:
                row["source"] = line.source
            if timestamps:
                row["start"], row["end"] = round(line.start_s, 3), round(line.end_s, 3)
            if translations and line.translation:
                row["translation"] = line.translation
            rows.append(row)
        return json.dumps({"format": "sottovoce-captions", "version": 1, "lines": rows},
                          ensure_ascii=False, indent=1) + "\n"
    if fmt == "txt":
        out = []
        for line in merged:
            stamp = f"[{format_timestamp(_caption_samples(line.start_s), '.')[:-4]}] " if timestamps else ""
            out.append(stamp + text(line).replace("\n", "\n    "))
        return "".join(row + "\n" for row in out)
    # One cue per line at least (a long line is split by the usual cue layout, labels kept on
    # its first cue); a translation is a cue line of its own.
    segments = tuple(Segment(start=_caption_samples(line.start_s), end=_caption_samples(line.end_s),
                             text=text(line).replace("\n", " / ")) for line in merged)
    duration = max((s.end for s in segments), default=0)
    transcript = Transcript(segments=segments, language=None, duration=duration)
    return to_srt(transcript) if fmt == "srt" else to_vtt(transcript)


def _caption_samples(seconds: float) -> int:
    return max(0, round(seconds * SAMPLE_RATE))
