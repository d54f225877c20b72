"""Prefix conditioning: which recent text the next final decode may see as its prompt (sans-I/O).

Feeding the previous text as Whisper's prompt improves names and punctuation, but it is the main
cause of repetition loops in peer apps (a hallucinated line is fed back and repeated forever).
So this tracker only keeps text that passed the quality checks, keeps at most ``max_chars``
(cut at a word boundary), forgets everything after ``reset_after_s`` without speech (a new
topic), and never mixes languages: with a pinned language only text of that language is used,
with auto-detection the history resets whenever the detected language changes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class PromptOptions:
    enabled: bool = True
    max_chars: int = 200
    reset_after_s: float = 20.0

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

    def add(self, text: str, *, at: float, flags: tuple[str, ...] = (),
            language: str | None = None) -> bool:
        """Offer a final text that ended at time ``at``; returns whether it was kept."""
        text = " ".join(text.split())
        if not self.options.enabled or not text or flags:
            return False
        if self.language is not None and language is not None and language != self.language:
            return False  # never let another language's text steer a pinned-language decode
        self._expire(at)
        if self.language is None and language != self._last_language:
            self.reset()
        self._last_language = language
        self._texts.append(text)
        self._chars += len(text) + 1
        while len(self._texts) > 1 and self._chars - len(self._texts[0]) - 1 >= self.options.max_chars:
            self._chars -= len(self._texts.popleft()) + 1
        self._last_at = at
        return True

    def prompt(self, now: float, max_chars: int | None = None) -> str | None:
        """The prompt for a decode starting at ``now``: the last ``max_chars`` (default: the
        option) of kept text."""
        self._expire(now)
        limit = min(self.options.max_chars, max_chars or self.options.max_chars)
        if not self._texts:
            return None
        text = " ".join(self._texts)
        if len(text) <= limit:
            return text
        tail = text[-limit:]
        if text[-limit - 1] == " ":
            return tail  # already starts at a word
        cut = tail.find(" ")
        # Start at a word boundary unless the tail is one huge word.
        return tail[cut + 1:] if 0 <= cut < len(tail) - 1 else tail

    def reset(self) -> None:
        self._texts.clear()
        self._chars = 0
        self._last_at = None

    def _expire(self, now: float) -> None:
        if self._last_at is not None and now - self._last_at > self.options.reset_after_s:
            self.reset()
