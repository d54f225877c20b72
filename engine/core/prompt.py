"""Prefix conditioning: which recent text the next final decode may see as its prompt (sans-I/O).

Feeding the previous text as Whisper's prompt improves names and punctuation, but it is the main
cause of repetition loops in peer apps (a hallucinated line is fed back and repeated forever).
So this tracker only keeps text that passed the quality checks, keeps at most ``max_chars``
(cut at a word boundary), forgets everything after ``reset_after_s`` without speech (a new
topic), and never mixes languages: with a pinned language only text of that language is used,
with auto-detection the history resets whenever the detected language changes.

Whisper copies its prompt's style: text without case and punctuation as the prompt gives text
without case and punctuation back, and that text becomes the next prompt (one unpunctuated
final made every later dictation of a session unpunctuated). So only text that kept its form
is kept: it ends a sentence (`has_form`), or it ends with the comma, colon or dash Whisper
writes where a pause cut a sentence that goes on ("And so, my fellow Americans,") and starts
as a sentence does or goes on with an open one: the next decode then goes on with it too ("ask
not ...", where with only the text before it Whisper wrote "Ask not ..."). Whether a text goes
on with an open sentence is the caller's one notion of it (`engine.core.form.OpenSentence`,
passed as ``goes_on``); the tracker keeps no second one. With no history yet, a decode of a known language
gets a short punctuated sentence in that language as its prompt (`STYLE_ANCHORS`): tiny.en
without a prompt writes the JFK clip without a comma or period; with "Okay, here it is." it
writes "And so, my fellow Americans ask not ..., ask what you can do for your country." (the
anchor lowers the English clips' WER and formatted WER, and silence and noise still decode to
nothing: docs/evidence.md). Languages without an anchor (and auto-detection) get no style prompt.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from engine.core.form import ends_marked, has_form, starts_lower

# A short, punctuated sentence per language: the prompt when there is no history yet. Each was
# measured (docs/evidence.md); add a language only with figures.
STYLE_ANCHORS = {"en": "Okay, here it is."}


@dataclass(frozen=True)
class PromptOptions:
    enabled: bool = True
    max_chars: int = 200
    reset_after_s: float = 20.0
    style_anchor: bool = True  # with no history, prompt with STYLE_ANCHORS[language]

    def __post_init__(self) -> None:
        if self.max_chars < 1:
            raise ValueError("max_chars must be >= 1")
        if self.reset_after_s <= 0:
            raise ValueError("reset_after_s must be > 0")


class PromptTracker:
    """Remembers checked final texts; `prompt()` returns what the next decode may condition on.

    Times are seconds on the caller's clock (any monotonic origin).
    """

    def __init__(self, options: PromptOptions | None = None, language: str | None = None) -> None:
        self.options = options or PromptOptions()
        self.language = language  # the pinned language, or None for auto-detection
        self._texts: deque[str] = deque()
        self._chars = 0
        self._last_language: str | None = None
        self._last_at: float | None = None

    def set_language(self, language: str | None) -> None:
        """Pin another language (None: detect); the history of the old one is dropped."""
        if language != self.language:
            self.language = language
            self.reset()

    def add(self, text: str, *, at: float, flags: tuple[str, ...] = (),
            language: str | None = None, goes_on: bool = False) -> bool:
        """Offer a final text that ended at time ``at``; returns whether it was kept.
        ``goes_on``: it goes on with the sentence the text before it left open
        (`engine.core.form.OpenSentence`), so a lower-case start is right."""
        text = " ".join(text.split())
        if not self.options.enabled or not text or flags:
            return False
        if self.language is not None and language is not None and language != self.language:
            return False  # never let another language's text steer a pinned-language decode
        self._expire(at)
        if self.language is None and language != self._last_language:
            self.reset()
        self._last_language = language  # (also for text without form: it picks the anchor)
        if not self._kept_form(text, goes_on):
            return False
        self._texts.append(text)
        self._chars += len(text) + 1
        while len(self._texts) > 1 and self._chars - len(self._texts[0]) - 1 >= self.options.max_chars:
            self._chars -= len(self._texts.popleft()) + 1
        self._last_at = at
        return True

    @staticmethod
    def _kept_form(text: str, goes_on: bool) -> bool:
        """A sentence end, or an open end (a comma, colon or dash where a pause cut the
        sentence) on a text that starts as a sentence does or goes on with an open one."""
        if has_form(text):
            return True
        return ends_marked(text) and (not starts_lower(text) or goes_on)

    def prompt(self, now: float, max_chars: int | None = None, *, anchor: bool = True
               ) -> str | None:
        """The prompt for a decode starting at ``now``: the last ``max_chars`` (default: the
        option) of kept text; with none, the style prompt (unless ``anchor`` is False)."""
        self._expire(now)
        limit = min(self.options.max_chars, max_chars or self.options.max_chars)
        if not self._texts:
            style = self.anchor() if anchor else None
            return style if style is not None and len(style) <= limit else None
        text = " ".join(self._texts)
        if len(text) <= limit:
            return text
        tail = text[-limit:]
        if text[-limit - 1] == " ":
            return tail  # already starts at a word
        cut = tail.find(" ")
        # Start at a word boundary unless the tail is one huge word.
        return tail[cut + 1:] if 0 <= cut < len(tail) - 1 else tail

    def anchor(self) -> str | None:
        """The style prompt for a decode with no history: the pinned language's, else that of
        the last language decoded (an English-only model always reports "en")."""
        if not (self.options.enabled and self.options.style_anchor):
            return None
        return STYLE_ANCHORS.get(self.language or self._last_language or "")

    def reset(self) -> None:
        self._texts.clear()
        self._chars = 0
        self._last_at = None

    def _expire(self, now: float) -> None:
        if self._last_at is not None and now - self._last_at > self.options.reset_after_s:
            self.reset()
