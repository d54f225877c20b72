"""The user's custom vocabulary: names and jargon decoding is biased towards (no Qt).

Settings keep it as plain text (``Settings.vocabulary``, the import/export format):

    # comments start with '#'
    Concord                 <- the default set: always used
    Abigail Claflin
    [medical]               <- a named set, used where a profile asks for it
    tachycardia

One entry per line (a word or a phrase, spaces collapsed); blank lines and ``#`` comments are
ignored; a ``[name]`` line starts a named set (letters, digits, ``-``, ``_``, ``.``), and a name
may appear again to add to its set. `parse` refuses anything else with a message naming the
line. `Vocabulary.terms(sets)` is what the engines take (`LiveEngine.set_vocabulary`,
`DecodeOptions.hotwords` via `as_prompt`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from engine.core.hotwords import MAX_TERM_CHARS, MAX_TERMS, VOCABULARY_MAX_CHARS, render

DEFAULT_SET = ""
_HEADER = re.compile(r"^\[([^\]]*)\]$")
_NAME = re.compile(r"^[\w.-]+$")


class VocabularyError(ValueError):
    """A vocabulary text that cannot be used; the message names the line."""


@dataclass(frozen=True)
class Vocabulary:
    """Entries by set: ``sets[""]`` is the default set (lines before any header)."""

    sets: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        """The named sets, in the order they first appear."""
        return tuple(n for n in self.sets if n != DEFAULT_SET)

    def terms(self, sets: Iterable[str] = ()) -> tuple[str, ...]:
        """The default set, then each named set asked for (unknown names add nothing), without
        repeats, in order."""
        out: list[str] = []
        for name in (DEFAULT_SET, *sets):
            for term in self.sets.get(name, ()):
                if term not in out:
                    out.append(term)
        return tuple(out)

    def as_prompt(self, max_chars: int = VOCABULARY_MAX_CHARS, sets: Iterable[str] = ()
                  ) -> str | None:
        """The terms as Whisper's hotwords text ("Concord, Abigail Claflin."), whole terms
        only, at most ``max_chars``; None when empty."""
        return render(self.terms(sets), max_chars)


def parse(text: str) -> Vocabulary:
    """The settings text as a `Vocabulary`; `VocabularyError` names the first bad line."""
    sets: dict[str, list[str]] = {}
    current = DEFAULT_SET
    count = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = " ".join(raw.split())
        if not line or line.startswith("#"):
            continue
        shown = repr(line) if len(line) <= 80 else f"{line[:80]!r}..."  # a message stays short
        header = _HEADER.match(line)
        if header:
            name = header.group(1).strip()
            if not _NAME.match(name):
                raise VocabularyError(
                    f"vocabulary line {number}: {shown} is not a set name (use letters, "
                    "digits, '-', '_' or '.' between the brackets)")
            current = name
            sets.setdefault(current, [])
            continue
        if line.startswith("[") or line.endswith("]"):
            raise VocabularyError(f"vocabulary line {number}: {shown} looks like a set "
                                  "header but is not one ([name] alone on its line)")
        if len(line) > MAX_TERM_CHARS:
            raise VocabularyError(f"vocabulary line {number}: an entry is at most "
                                  f"{MAX_TERM_CHARS} characters (this one has {len(line)})")
        entries = sets.setdefault(current, [])
        if line not in entries:
            entries.append(line)
            count += 1
        if count > MAX_TERMS:
            raise VocabularyError(f"vocabulary line {number}: more than {MAX_TERMS} entries")
    return Vocabulary({name: tuple(terms) for name, terms in sets.items()})


def keep_first(text: str, limit: int = MAX_TERMS) -> tuple[str, tuple[str, ...]]:
    """``text`` without the entries past the first ``limit`` (their lines removed; headers and
    comments kept), and the entries removed, in order: a vocabulary one entry too long keeps
    its first ``limit`` rather than failing whole."""
    kept: list[str] = []
    dropped: list[str] = []
    seen: set[tuple[str, str]] = set()
    current = DEFAULT_SET
    for raw in text.splitlines():
        line = " ".join(raw.split())
        header = _HEADER.match(line)
        if header:
            current = header.group(1).strip()
        elif line and not line.startswith("#") and (current, line) not in seen:
            seen.add((current, line))
            if len(seen) > limit:
                dropped.append(line)
                continue
        kept.append(raw)
    if not dropped:
        return text, ()
    return "\n".join(kept) + ("\n" if text.endswith("\n") else ""), tuple(dropped)


def load(path: str | Path) -> Vocabulary:
    """A vocabulary file (the settings' plain-text format, UTF-8). OSError if unreadable,
    `VocabularyError` if malformed (the message starts with the file name)."""
    source = Path(path)
    text = source.read_text(encoding="utf-8")
    try:
        return parse(text)
    except VocabularyError as exc:
        raise VocabularyError(f"{source.name}: {exc}") from None
