"""The form of a final text: sentence case and end punctuation, whatever path produced it.

Whisper writes case and punctuation, except when something steers it away (an unpunctuated
prompt, a short window of unpadded audio): then a whole utterance comes back as
"and so my fellow americans ask not ...". `ensure_form` is the last guard every final passes
through (local, server, files): a cased first letter is capitalised and a missing sentence end
becomes a period, on the text and on its last word alike. It never touches what Whisper did
write (commas, inner case) and leaves scripts without case or a known sentence end alone. A
final that goes on with the sentence the previous final left open ("... my fellow Americans,"
then a pause, then "ask not ...") keeps its lower-case start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from engine.types import Word

# A sentence's end in the scripts Whisper writes (Latin, CJK, Arabic, Devanagari, Armenian,
# Ethiopic), optionally followed by closing quotes or brackets.
SENTENCE_ENDS = ".?!\u2026\u3002\uff1f\uff01\u061f\u0964\u0589\u1362"
CLOSERS = "\"')]}\u201d\u2019\u00bb"


def has_form(text: str) -> bool:
    """Whether ``text`` ends a sentence the way Whisper writes one: its last character (before
    closing quotes or brackets) is sentence-end punctuation."""
    stripped = text.rstrip().rstrip(CLOSERS)
    return bool(stripped) and stripped[-1] in SENTENCE_ENDS


def reads_finished(text: str) -> bool:
    """Whether ``text`` reads as a finished sentence: two words or more, ending a sentence, and
    not trailing off ("..." is how Whisper writes a voice that pauses mid-thought)."""
    stripped = text.rstrip().rstrip(CLOSERS)
    return (has_form(text) and not stripped.endswith(("...", "\u2026"))
            and len(stripped.split()) >= 2)


# Marks Whisper ends a piece with when the thought goes on: a trailing "..." (a voice that
# pauses mid-sentence), a comma, a colon, a semicolon or a dash.
OPEN_ENDS = ("...", "\u2026", ",", ";", ":", "-", "\u2013", "\u2014")


def ends_marked(text: str) -> bool:
    """Whether Whisper punctuated where ``text`` stops: a sentence end (`has_form`) or a mark
    of a sentence that goes on (a comma, colon, semicolon or dash; `OPEN_ENDS`)."""
    stripped = text.rstrip().rstrip(CLOSERS)
    return has_form(text) or (bool(stripped) and stripped.endswith(OPEN_ENDS))


def starts_lower(text: str) -> bool:
    """The text starts with a lower-case letter that has a capital ("ask not", "and so my
    fellow americans": how a whole utterance comes back when Whisper loses its form, and how a
    piece that goes on with an open sentence rightly starts)."""
    first = next((c for c in text if c.isalnum()), "")
    return first.islower() and first.upper() != first


def reads_open(text: str) -> bool:
    """Whether ``text`` reads as a sentence that goes on: it ends with one of `OPEN_ENDS`, or,
    in a cased script, with a word and no sentence end at all ("and so my fellow")."""
    stripped = text.rstrip().rstrip(CLOSERS)
    if not stripped:
        return False
    return stripped.endswith(OPEN_ENDS) or (stripped[-1].isalnum() and _cased(stripped[-1]))


def ends_sentence_in(prefix: str, longer: str) -> bool | None:
    """Does ``longer`` (a decode of the same audio and more) end a sentence where ``prefix``
    (a decode that stopped at a pause) ends? Whisper ends whatever audio it is given with a
    period, so ``prefix`` alone cannot tell a sentence end from a breath; a decode that heard
    what came next punctuates the pause as the sentence reads. The place in ``longer`` is where
    ``prefix``'s last two words are, else its last word (within two words of the same
    position, as two decodes may split a word differently), else, when the two heard the last
    words differently ("could hear." / "could out here. We"), the same word count give or
    take one. True or False once ``longer`` has a word after that place; None: it does not
    reach past it (yet), or ``prefix`` has no words."""
    short, long_ = prefix.split(), longer.split()
    if not short or not _key(short[-1]):
        return None
    end = len(short) - 1  # where prefix's last word would be in longer
    for size in (2, 1):
        keys = [_key(w) for w in short[-size:]]
        for last in sorted(range(end - 2, end + 3), key=lambda i: abs(i - end)):
            first = last - size + 1
            if first >= 0 and last + 1 < len(long_) and \
                    [_key(w) for w in long_[first:last + 1]] == keys:
                return reads_finished(" ".join(long_[:last + 1]))
    if end + 2 >= len(long_):
        return None
    return any(reads_finished(" ".join(long_[:i + 1])) for i in range(max(0, end - 1), end + 2))


class OpenSentence:
    """Whether the next final goes on with the sentence the last one left open (`reads_open`:
    "And so, my fellow Americans," then a pause, then "ask not ..."): then its lower-case start
    is right (``ensure_form(start=False)``). ``within`` samples of the last one's end at most
    (past that, a new sentence whatever came before). One per stream: the policy's finals and
    the remote client's (any server's) follow the same rule."""

    def __init__(self, within: int) -> None:
        self.within = within
        self._end: int | None = None  # where the last final that left its sentence open ended

    def goes_on(self, start: int) -> bool:
        """Does a final starting at sample ``start`` go on with an open sentence?"""
        return self._end is not None and start - self._end <= self.within

    def ended(self, text: str, end: int) -> None:
        """A final ``text`` (as the user gets it) ending at sample ``end``; empty ones change
        nothing (noise between two pieces does not end a sentence)."""
        if text:
            self._end = end if reads_open(text) else None


def _key(word: str) -> str:
    return "".join(c for c in word.lower() if c.isalnum())


def _cased(char: str) -> bool:
    return char.lower() != char.upper()


def _capitalisable(char: str) -> bool:
    """A lower-case letter with one upper-case partner ("ß" -> "SS" and the micro sign -> Greek
    capital mu are left alone)."""
    upper = char.upper()
    return char.islower() and len(upper) == 1 and upper.lower() == char


def ensure_form(text: str, words: Sequence[Word] = (), *, end: bool = True, start: bool = True
                ) -> tuple[str, tuple[Word, ...]]:
    """``text`` (and its ``words``) with (``start``) a capital first letter and (``end``) a
    sentence end. Voice-activity finals pass ``end=False``: the VAD cuts a sentence at its
    pauses, and a piece ends where Whisper ended it ("And so my fellow Americans ask not").
    A text that goes on with a sentence the text before it left open (`reads_open`: "And so,
    my fellow Americans," then "ask not what ...") passes ``start=False``: its first letter
    stays as Whisper wrote it.

    Only cased scripts get either: "ask not" -> "Ask not.", "東京" stays as it is. A text ending
    in a comma or dash is left open; a trailing closing quote keeps its place ("he said 'no'" ->
    "He said 'no'.")."""
    text = text.strip()
    words = tuple(words)
    if not text:
        return text, words
    first = next((i for i, c in enumerate(text) if c.isalnum()), None)
    if start and first is not None and _capitalisable(text[first]):
        text = text[:first] + text[first].upper() + text[first + 1:]
        if words:
            words = (_capitalised(words[0]), *words[1:])
    stripped = text.rstrip(CLOSERS)
    last = stripped[-1:] if stripped else ""
    if end and last and (last.isdigit() or (last.isalpha() and _cased(last))):
        text = text + "."
        if words:
            words = (*words[:-1], replace(words[-1], text=words[-1].text + "."))
    return text, words


def _capitalised(word: Word) -> Word:
    body = word.text
    index = next((i for i, c in enumerate(body) if c.isalnum()), None)
    if index is None or not _capitalisable(body[index]):
        return word
    return replace(word, text=body[:index] + body[index].upper() + body[index + 1:])
