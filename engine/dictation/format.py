"""Joining dictated utterances: each final text fitted to the text it lands after.

- Spacing: a space before the next utterance, none at the start of the field or of a line, and
  none before punctuation that continues the previous text ("Period." said alone); never two
  spaces, no spaces around line breaks.
- Punctuation: never doubled ("etc.." -> "etc.", ",," -> ","); a dictated mark said on its own
  replaces the mark the previous utterance ended with ("Hello world." + "question mark" ->
  "Hello world?"), by deleting that one character first (`Joined.delete_chars`).
- Case, style "sentence": the first word starts with a capital at the start of the field, of a
  line and after . ? !; after text that ends mid-sentence it is lowercased when Whisper's
  capital was only the sentence start: a plain Titlecase word that is not "I" ("I'm", ...) and
  not known as capitalised mid-sentence (a name: `known_capitals`).
- Style "chat": starts lowercase the same way, wherever it lands, and drops a trailing period
  (keeps ? and ! and an ellipsis).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from engine.dictation.commands import SENTENCE_END, capitalise

STYLES = ("sentence", "chat")
MARKS = ".,;:!?"
ALWAYS_CAPITAL = frozenset({"I", "I'm", "I'll", "I'd", "I've"})
CLOSERS = "\"')”’"


@dataclass(frozen=True)
class Joined:
    """What to do in the target: delete `delete_chars` characters, then insert `text`."""

    text: str
    delete_chars: int = 0


def tidy(text: str, language: str | None = None) -> str:
    """One utterance cleaned: single spaces, no spaces around line breaks or ends, no doubled
    punctuation (an ellipsis stays), no space before a mark (except in French, which has one
    before ? ! : ;)."""
    text = re.sub(r"[ \t\u00a0]+", " ", text)
    text = re.sub(r" *\n *", "\n", text).strip(" ")
    if (language or "").split("-")[0].lower() != "fr":
        text = re.sub(r" +([,.;:!?])", r"\1", text)
    previous = None
    while text != previous:  # one fix can make another pair ("etc.,." -> "etc.." -> "etc.")
        previous = text
        text = re.sub(r"([,;:!?])\1+", r"\1", text)
        text = re.sub(r"(?<!\.)\.\.(?!\.)", ".", text)  # "etc.." -> "etc."; "..." stays
        text = re.sub(r"\.{4,}", "...", text)
        text = re.sub(r"[,;:]+([.!?])", r"\1", text)  # ",." -> "."
        text = re.sub(r"([!?])\.+", r"\1", text)  # "?." -> "?"
        text = re.sub(r"([!?])[,;:]+", r"\1", text)  # "?," -> "?"
    return text


def ends_sentence(before: str) -> bool:
    """Whether text after `before` starts a sentence (the field's start counts)."""
    stripped = before.rstrip(" ").rstrip(CLOSERS)
    return not stripped or stripped.endswith("\n") or stripped[-1] in SENTENCE_END


def is_sentence_capital(word: str, known_capitals: Collection[str] = ()) -> bool:
    """Whether the word's capital can only be Whisper's sentence start (safe to lowercase)."""
    core = word.strip("\"'“‘(,.;:!?)”’").replace("’", "'")
    if not core or core in ALWAYS_CAPITAL or core in known_capitals:
        return False
    letters = core.replace("'", "").replace("-", "")
    return letters.isalpha() and core[0].isupper() and core[1:] == core[1:].lower()


def lowercase_first(text: str, known_capitals: Collection[str] = ()) -> str:
    match = re.match(r"\s*(\S+)", text)
    if match is None or not is_sentence_capital(match[1], known_capitals):
        return text
    start = match.start(1)
    for i in range(start, match.end(1)):
        if text[i].isalpha():
            return text[:i] + text[i].lower() + text[i + 1:]
    return text


def join(before: str, text: str, style: str = "sentence",
         known_capitals: Collection[str] = (), language: str | None = None,
         dictated_end: bool = False) -> Joined:
    """Fit one utterance after `before` (what was inserted into this target so far; "" for a
    fresh field). `dictated_end`: the final mark was dictated, so the chat style keeps it."""
    text = tidy(text, language)
    delete = 0
    lead = len(text) - len(text.lstrip(MARKS))
    trail = len(before) - len(before.rstrip(MARKS))
    if lead and before.endswith("..."):
        text = text.lstrip(".").lstrip(" ")  # an ellipsis stays as it is
    elif lead and trail:
        if text[:lead] == before[-trail:]:
            text = text[lead:].lstrip(" ")  # "Hello." + "." -> nothing new
        else:
            delete, before = trail, before[:-trail]  # "Hello." + "?" -> "Hello?"
    elif text.startswith("\n") and before.endswith((",", ";", ":")):
        delete, before = 1, before[:-1]  # "Dear John," + "new line": the comma was a guess
    if not text:
        return Joined("", delete)
    lead = len(text) - len(text.lstrip(MARKS + "\n"))
    head, body = text[:lead], text[lead:]
    if style == "chat" or not ends_sentence(before + head):
        body = lowercase_first(body, known_capitals)
    else:
        body = capitalise(body)
    text = head + body
    if style == "chat" and text.endswith(".") and not text.endswith("..") and not dictated_end:
        text = text[:-1]
    if not text:
        return Joined("", delete)
    quote_open = before.count('"') % 2 == 1
    attach = (not before or before.endswith("\n") or text[0] in MARKS + "\n"
              or (quote_open and (text[0] == '"' or before.endswith('"'))))
    return Joined(("" if attach else " ") + text, delete)


def learn_capitals(text: str) -> set[str]:
    """Words capitalised mid-sentence in `text` (names, most likely): kept capitalised at the
    start of a later utterance that continues a sentence."""
    found: set[str] = set()
    for line in text.split("\n"):
        previous = ""
        for word in line.split():
            core = word.strip("\"'“‘(,.;:!?)”’").replace("’", "'")
            if (previous and previous[-1] not in SENTENCE_END and core[:1].isupper()
                    and core not in ALWAYS_CAPITAL):
                found.add(core)
            previous = word.rstrip("\"')”’")
    return found
