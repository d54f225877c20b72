"""Spoken commands: "new line", "comma", "scratch that", ... acted on, not typed.

Whisper writes a spoken command as words with its own punctuation around them ("Hello comma
world." / "New line."), so commands are matched on whole words, ignoring case and the
punctuation around them; a word that merely contains one ("periodic") is left alone, and so is
a command word after an article ("the period", "a new line"), where it is a noun.

A command's own punctuation is Whisper's guess and is dropped; so is Whisper's punctuation just
before a punctuation command ("Hello, period." -> "Hello."). "scratch that" drops what was said
before it in the same utterance, or, said first, the previous utterance (`Parsed.scratch`).

Tables are per language (the FinalText's `language`; None means English, the English-only
models' language): another language adds a `CommandTable` to `TABLES`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PUNCT = "punct"
NEWLINE = "newline"
PARAGRAPH = "paragraph"
OPEN_QUOTE = "open_quote"
CLOSE_QUOTE = "close_quote"
SCRATCH = "scratch"

SENTENCE_END = ".?!"
WHISPER_PUNCT = ".,;:!?"


@dataclass(frozen=True)
class Command:
    kind: str
    text: str = ""  # the punctuation mark of a PUNCT command


Token = str | Command  # text as Whisper wrote it, or a command


@dataclass(frozen=True)
class CommandTable:
    """A language's commands: phrase (lowercase words) -> command, and the words that make the
    next word a noun rather than a command."""

    phrases: dict[tuple[str, ...], Command]
    articles: frozenset[str]

    @property
    def longest(self) -> int:
        return max(len(p) for p in self.phrases)


_COMMA, _PERIOD = Command(PUNCT, ","), Command(PUNCT, ".")
_QUESTION, _EXCLAIM = Command(PUNCT, "?"), Command(PUNCT, "!")
ENGLISH = CommandTable(
    phrases={
        ("new", "line"): Command(NEWLINE), ("newline",): Command(NEWLINE),
        ("new", "paragraph"): Command(PARAGRAPH),
        ("period",): _PERIOD, ("full", "stop"): _PERIOD, ("fullstop",): _PERIOD,
        ("comma",): _COMMA,
        ("question", "mark"): _QUESTION, ("questionmark",): _QUESTION,
        ("exclamation", "mark"): _EXCLAIM, ("exclamation", "point"): _EXCLAIM,
        ("exclamationmark",): _EXCLAIM, ("exclamationpoint",): _EXCLAIM,
        ("open", "quote"): Command(OPEN_QUOTE), ("close", "quote"): Command(CLOSE_QUOTE),
        ("scratch", "that"): Command(SCRATCH),
    },
    articles=frozenset({"a", "an", "the", "this", "that", "each", "every", "one", "another",
                        "no", "my", "your", "its"}),
)
TABLES: dict[str, CommandTable] = {"en": ENGLISH}


def table_for(language: str | None) -> CommandTable | None:
    """The table for a language code ("en", "en-US"; None: English), None when there is none."""
    code = (language or "en").split("-")[0].split("_")[0].lower()
    return TABLES.get(code)


@dataclass(frozen=True)
class Parsed:
    """An utterance as text and commands; `scratch`: how many earlier utterances to remove."""

    tokens: tuple[Token, ...]
    scratch: int = 0

    @property
    def ends_with_mark(self) -> bool:
        """Whether the utterance ends with a dictated mark (kept even in the chat style)."""
        return bool(self.tokens) and isinstance(self.tokens[-1], Command) and (
            self.tokens[-1].kind == PUNCT)


def _normal(word: str) -> str:
    return re.sub(r"[^\w']", "", word).lower()


def parse(text: str, language: str | None) -> Parsed:
    """Split an utterance into text and the commands in it (no table: all text)."""
    table = table_for(language)
    words = text.split()
    if table is None or not words:
        return Parsed((text,) if text.strip() else ())
    normal = [_normal(w) for w in words]
    tokens: list[Token] = []
    scratch = 0
    plain: list[str] = []  # words since the last command
    i = 0
    while i < len(words):
        found = _match(table, normal, i)
        if found is None:
            plain.append(words[i])
            i += 1
            continue
        command, size = found
        if command.kind == SCRATCH:
            if not tokens and not plain:
                scratch += 1
            tokens, plain = [], []
        else:
            if plain:
                tokens.append(" ".join(plain))
                plain = []
            tokens.append(command)
            last = words[i + size - 1]
            if (command.kind == CLOSE_QUOTE and i + size == len(words)
                    and last[-1] in SENTENCE_END):
                tokens.append(Command(PUNCT, last[-1]))  # the sentence ends after the quote
        i += size
    if plain:
        tokens.append(" ".join(plain))
    return Parsed(tuple(tokens), scratch)


def _match(table: CommandTable, normal: list[str], i: int) -> tuple[Command, int] | None:
    for size in range(min(table.longest, len(normal) - i), 0, -1):
        command = table.phrases.get(tuple(normal[i:i + size]))
        if command is None:
            continue
        if command.kind != SCRATCH and i > 0 and normal[i - 1] in table.articles:
            return None  # "the period", "a new line": the word, not the command
        return command, size
    return None


def render(tokens: tuple[Token, ...], sentence_case: bool) -> str:
    """The tokens as text: punctuation attached to the word before it (replacing Whisper's),
    line breaks without spaces around them, quotes hugging what they enclose. With
    `sentence_case`, text after a dictated sentence end or line break starts with a capital."""
    out = ""
    glue = True  # no space before the next text
    capital = False
    dictated = False  # whether `out` ends with a dictated mark (kept), not Whisper's guess
    for token in tokens:
        if isinstance(token, str):
            text = token.strip()
            if capital:
                text = capitalise(text)
            out += ("" if glue else " ") + text
            glue, capital, dictated = False, False, False
        elif token.kind == PUNCT:
            out = out.rstrip(" ")
            if not out.endswith('"'):
                out = _strip_trailing(out, WHISPER_PUNCT)
            out += token.text
            glue, capital = False, sentence_case and token.text in SENTENCE_END
            dictated = True
        elif token.kind in (NEWLINE, PARAGRAPH):
            out = out.rstrip(" ")
            if not dictated:
                out = _strip_trailing(out, ",;:")
            out += "\n" if token.kind == NEWLINE else "\n\n"
            glue, capital, dictated = True, sentence_case, False
        elif token.kind == OPEN_QUOTE:
            out += ("" if glue else " ") + '"'
            glue, dictated = True, False
        elif token.kind == CLOSE_QUOTE:
            out = out.rstrip(" ")
            if not dictated:
                out = _strip_trailing(out, ",;:")
            out += '"'
            glue, dictated = False, False
    return out


def _strip_trailing(text: str, chars: str) -> str:
    if text.endswith("...") and "." in chars:
        return text  # an ellipsis is the speaker's, not a guess
    return text.rstrip(chars)


def capitalise(text: str) -> str:
    """First letter upper case (the rest as it is)."""
    for i, char in enumerate(text):
        if char.isalpha():
            return text[:i] + char.upper() + text[i + 1:]
        if not (char in "\"'(“‘" or char.isspace()):
            return text
    return text
