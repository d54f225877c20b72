"""LocalAgreement-2 (Macháček et al., whisper_streaming): commit words two decodes agree on.

Every partial decode re-transcribes the whole utterance so far. A word is *committed* (shown
black, never taken back) once two consecutive hypotheses agree on it and on every word before
it; the rest of the newest hypothesis is *tentative* (shown grey, may still change). Words are
compared after normalisation (case, surrounding punctuation), but shown as the newest decode
wrote them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_EDGE_PUNCT = re.compile(r"^[^\w']+|[^\w']+$", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Whitespace-separated words of ``text`` as shown (punctuation attached)."""
    return text.split()


def comparable(word: str) -> str:
    """The form two hypotheses are compared in: lower case, no leading/trailing punctuation."""
    return _EDGE_PUNCT.sub("", word.lower())


class LocalAgreement:
    """Tracks the committed prefix of one utterance across successive hypotheses."""

    def __init__(self) -> None:
        self._committed: list[str] = []
        self._previous: list[str] = []
        self._tentative: list[str] = []

    @property
    def committed(self) -> str:
        return " ".join(self._committed)

    @property
    def tentative(self) -> str:
        return " ".join(self._tentative)

    def update(self, hypothesis: Sequence[str]) -> tuple[str, str]:
        """Feed the newest hypothesis (its words); return (committed, tentative) text.

        The committed prefix only grows: a hypothesis that rewrites committed words leaves them
        as they are and contributes only what lies beyond them.
        """
        words = list(hypothesis)
        agreed = common_prefix(self._previous, words)
        keeps_committed = common_prefix(self._committed, words) == len(self._committed)
        if agreed > len(self._committed) and keeps_committed:
            self._committed += words[len(self._committed):agreed]  # committed words stay as shown
        self._previous = words
        self._tentative = words[len(self._committed):]
        return self.committed, self.tentative

    def reset(self) -> None:
        self._committed, self._previous, self._tentative = [], [], []


def common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    """How many words ``a`` and ``b`` agree on from the start (compared as `comparable`)."""
    n = 0
    for left, right in zip(a, b, strict=False):
        if comparable(left) != comparable(right):
            break
        n += 1
    return n
