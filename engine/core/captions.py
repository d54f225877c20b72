"""Caption decisions, sans-I/O: one caption line, the amend rule, the echo guard.

- `amend`: a final that goes on with the sentence its source's previous final ended ("...can do
  for you." then "ask what you can do") is joined to it: captions and the caption transcript may
  be revised (text already typed into another app never is; dictation does not use this).
- `EchoGuard`: with two sources ("you and them": microphone and system audio), what the speakers
  play reaches the microphone too. A microphone line that repeats a system line heard within a
  short window is dropped (kept once, as the system's); a microphone line that ends while the
  system source is still inside an utterance whose partial text already holds some of its
  words is held until that utterance's final shows whether it was an echo (at most
  ``hold_s``); one that shares nothing with it is the user's own and shows at once.
- `in_range`: the lines of a time range (`engine.wire.export.export_captions` writes them out).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from engine.core.form import has_form

_SENTENCE_STOP = (".", "…")
AMEND_GAP_S = 3.0  # a longer pause starts a new line even when the words go on
PIECE_GAP_S = 0.01  # a committed piece starts where the one before it was cut
_WORD = re.compile(r"[\w']+")


@dataclass(frozen=True)
class CaptionLine:
    """One caption: a final of one source. ``key`` tells lines apart (source and utterance id);
    times are seconds on the session's audio timeline; ``translation``: English, when asked."""

    source: str
    key: str
    text: str
    start_s: float
    end_s: float
    language: str | None = None
    translation: str = ""

    def labelled(self) -> str:
        return f"{self.source}: {self.text}" if self.source else self.text


def continues(previous: CaptionLine, line: CaptionLine) -> bool:
    """Does ``line`` go on with the sentence ``previous`` left (same source, a short pause, and
    either ``line`` starts in lower case: Whisper capitalises a sentence's first word, so a
    lower-case one means the previous final's full stop was a guess; or ``line`` is the next
    piece of a long utterance committed while it is still spoken, `PolicyOptions.commit_stable`:
    it starts where ``previous`` was cut, which left its sentence open, "...in the year" +
    "1462.")? A final after a pause that merely lacks a sentence end (the VAD's finals often do)
    starts a line of its own, as before early commits."""
    first = next((c for c in line.text.strip() if c.isalpha()), "")
    gap = line.start_s - previous.end_s
    piece = abs(gap) <= PIECE_GAP_S and not has_form(previous.text)
    return (previous.source == line.source and (first.islower() or piece)
            and 0 <= gap <= AMEND_GAP_S
            and not previous.text.rstrip().endswith(("?", "!")))


def amend(previous: CaptionLine, line: CaptionLine) -> CaptionLine | None:
    """The one line ``previous`` becomes when ``line`` continues its sentence, else None
    ("...can do for you." + "ask what..." -> "...can do for you, ask what...")."""
    if not continues(previous, line):
        return None
    head = previous.text.rstrip()
    if head.endswith(_SENTENCE_STOP) and not head.endswith(".."):
        head = head[:-1] + ","  # the full stop was a clause's end: keep the pause it marked
    translation = " ".join(t for t in (previous.translation, line.translation) if t)
    return replace(previous, text=f"{head} {line.text.strip()}", end_s=line.end_s,
                   translation=translation)


def merge_lines(lines: Sequence[CaptionLine]) -> list[CaptionLine]:
    """The transcript as shown: each line amended into its source's previous one where it
    continues that sentence (lines of two sources interleave; each source has its own)."""
    merged: list[CaptionLine] = []
    last: dict[str, int] = {}
    for line in lines:
        at = last.get(line.source)
        joined = amend(merged[at], line) if at is not None and at == len(merged) - 1 else None
        if joined is not None and at is not None:
            merged[at] = joined
        else:
            last[line.source] = len(merged)
            merged.append(line)
    return merged


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def echoes(mine: CaptionLine, theirs: CaptionLine, *, window_s: float = 3.0,
           similarity: float = 0.6) -> bool:
    """Does ``mine`` (the microphone's) repeat ``theirs`` (the system's): heard at about the
    same time, most of its words among theirs?"""
    if mine.start_s > theirs.end_s + window_s or mine.end_s < theirs.start_s - window_s:
        return False
    words = _words(mine.text)
    if not words:
        return True  # nothing of its own to say
    found = Counter(words) & Counter(_words(theirs.text))
    return sum(found.values()) / len(words) >= similarity


class EchoGuard:
    """Keeps a system line once when the microphone heard it too. See the module docstring.
    Feed it finals (`final`) and whether the system source is in an utterance (`speaking`);
    `due` releases held lines whose wait is over; `flush` everything at the end. Times ``now``
    are the caller's clock (seconds)."""

    def __init__(self, you: str, them: str, *, window_s: float = 3.0, hold_s: float = 6.0,
                 similarity: float = 0.6) -> None:
        self.you, self.them = you, them
        self.window_s, self.hold_s, self.similarity = window_s, hold_s, similarity
        self._recent: list[CaptionLine] = []  # system lines of the last window
        self._held: list[tuple[float, CaptionLine]] = []  # (release at, line)
        self._speaking = False
        self._partial = ""  # the system's utterance in flight, as its last partial heard it
        self.dropped: list[CaptionLine] = []  # microphone lines found to be echoes (the
        # caller reads and clears it)

    def speaking(self, active: bool, partial: str = "") -> None:
        """The system source is (not) in an utterance; ``partial``: its text so far."""
        self._speaking = active
        self._partial = partial if active else ""

    def final(self, line: CaptionLine, now: float) -> list[CaptionLine]:
        """The lines to show now, in the order spoken."""
        if line.source == self.them:
            self._speaking = False
            self._recent = [t for t in self._recent if t.end_s >= line.start_s - 4 * self.window_s]
            self._recent.append(line)
            released = []
            for _, held in self._held:
                if self._is_echo(held):
                    self.dropped.append(held)
                else:
                    released.append(held)
            self._held = []
            return sorted([line, *released], key=lambda x: x.start_s)
        if self._is_echo(line):
            self.dropped.append(line)
            return []
        in_flight = replace(line, source=self.them, text=self._partial)
        if self._speaking and (not self._partial or echoes(
                line, in_flight, window_s=float("inf"), similarity=self.similarity / 2)):
            self._held.append((now + self.hold_s, line))
            return []
        return [line]

    def due(self, now: float) -> list[CaptionLine]:
        ready = [line for at, line in self._held if at <= now or not self._speaking]
        self._held = [(at, line) for at, line in self._held if line not in ready]
        return ready

    def flush(self) -> list[CaptionLine]:
        held, self._held = [line for _, line in self._held], []
        return held

    def _is_echo(self, line: CaptionLine) -> bool:
        return any(echoes(line, theirs, window_s=self.window_s, similarity=self.similarity)
                   for theirs in self._recent)


def in_range(lines: Sequence[CaptionLine], start_s: float | None = None,
             end_s: float | None = None) -> list[CaptionLine]:
    """The lines that overlap [start_s, end_s] (either open)."""
    return [line for line in lines
            if (start_s is None or line.end_s >= start_s) and (end_s is None or line.start_s <= end_s)]
