"""The dictation text layer: for each final text, what to insert into the target, and what to
delete there first.

One `Dictation` per app session. Per final, the caller says where the text goes (an opaque
target key: a window, a field; None when unknown), the text style, the replacement rules and
whether spoken commands are on: explicit parameters, so a per-application profile can change
any of them for one insertion. The steps: spoken commands (engine.dictation.commands), then the
replacement rules (engine.dictation.rules), then joining to what this target already got
(engine.dictation.format).

The joining state is per target and starts fresh when the target changes or after a long pause
(`idle_reset_s`): the first dictation into a new field has nothing to join to. "scratch that"
removes the last utterance inserted into the current target (backspacing over exactly what was
inserted) and tells the caller to drop it from the session's transcript too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from engine.dictation.commands import parse, render
from engine.dictation.format import STYLES, join, learn_capitals, tidy
from engine.dictation.rules import RuleError, Rules, apply_rules

IDLE_RESET_S = 300.0
MEMORY = 50  # utterances per target that "scratch that" can remove, one after another
MAX_CAPITALS = 2000


@dataclass(frozen=True)
class Insertion:
    """The answer for one final text.

    text: insert this into the target (spacing included; may be "").
    delete_chars: first delete this many characters before the cursor (backspaces).
    shown: the utterance as the transcript, captions, session and export show it ("" when it
      was only a command).
    unshown: the shown texts of the earlier utterances "scratch that" removed, newest first
      (the caller drops them from its transcript where they are still its last lines).
    problems: replacement rules skipped on this text, in words (too slow, too much growth).
    """

    text: str = ""
    delete_chars: int = 0
    shown: str = ""
    unshown: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.text and not self.delete_chars


@dataclass
class _Entry:
    inserted: str
    shown: str  # its line in the transcript ("" for none)


@dataclass
class _Target:
    key: Hashable | None
    entries: list[_Entry] = field(default_factory=list)

    def before(self) -> str:
        return "".join(e.inserted for e in self.entries)[-400:]


class Dictation:
    """Per-session dictation state. Not thread-safe: call from one thread (the GUI's)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 idle_reset_s: float = IDLE_RESET_S) -> None:
        self._clock = clock
        self.idle_reset_s = idle_reset_s
        self._target = _Target(None)
        self._last: float | None = None
        self._capitals: set[str] = set()

    def reset(self) -> None:
        """Forget what was inserted: the next dictation starts fresh."""
        self._target = _Target(self._target.key)

    def remember_capitals(self, words: Iterable[str]) -> None:
        """Words that keep their capital (the vocabulary: names, jargon)."""
        for word in words:
            if len(self._capitals) < MAX_CAPITALS:
                self._capitals.update(w for w in word.split() if w[:1].isupper())

    def insertion(self, text: str, *, rules: Rules = (), style: str = "sentence",
                  commands: bool = True, target: Hashable | None = None,
                  language: str | None = None) -> Insertion:
        """What to do in `target` for one final text."""
        if style not in STYLES:
            raise ValueError(f"style must be one of {', '.join(STYLES)} (got {style!r})")
        now = self._clock()
        if (target != self._target.key or self._last is None
                or now - self._last > self.idle_reset_s):
            self._target = _Target(target)
        self._last = now
        if len(self._capitals) < MAX_CAPITALS:
            self._capitals |= learn_capitals(text)
        if commands:
            parsed = parse(text, language)
            spoken = render(parsed.tokens, sentence_case=style == "sentence")
            scratch, dictated_end = parsed.scratch, parsed.ends_with_mark
        else:
            spoken, scratch, dictated_end = text, 0, False
        problems: list[RuleError] = []
        spoken = apply_rules(spoken, rules, problems)
        delete, unshown = self._scratch(scratch)
        joined = join(self._target.before(), spoken, style, self._capitals, language,
                      dictated_end)
        if joined.delete_chars:
            self._trim_last(joined.delete_chars)
        shown = " ".join(tidy(spoken, language).split())
        if not any(c.isalnum() for c in shown):
            shown = ""  # only punctuation or a line break: no transcript line of its own
        if joined.text or shown:
            self._target.entries.append(_Entry(joined.text, shown))
            del self._target.entries[:-MEMORY]
        return Insertion(joined.text, delete + joined.delete_chars, shown, unshown,
                         tuple(str(p) for p in problems))

    def caption(self, text: str, rules: Rules = (), language: str | None = None,
                problems: list[RuleError] | None = None) -> str:
        """Captions mode: the text with the replacement rules, nothing inserted, no commands
        (rules skipped on it go to ``problems``, see `apply_rules`)."""
        return " ".join(tidy(apply_rules(text, rules, problems), language).split())

    def _scratch(self, count: int) -> tuple[int, tuple[str, ...]]:
        delete, unshown = 0, []
        entries = self._target.entries
        for _ in range(count):
            if not entries:
                break
            entry = entries.pop()
            delete += len(entry.inserted)
            if entry.shown:
                unshown.append(entry.shown)
        return delete, tuple(unshown)

    def _trim_last(self, chars: int) -> None:
        entries = self._target.entries
        while chars and entries:
            last = entries[-1]
            cut = min(chars, len(last.inserted))
            last.inserted = last.inserted[:len(last.inserted) - cut]
            chars -= cut
            if not last.inserted and not last.shown:
                entries.pop()
            elif chars:
                break
