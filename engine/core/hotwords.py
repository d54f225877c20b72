"""The user's vocabulary as Whisper sees it (sans-I/O): the terms rendered into one short text
for the previous-text slot (`engine.types.DecodeOptions.hotwords`), and the check that a decode
did not just recite that list.

Rendering: ``"Concord, Quilter, Abigail Claflin."``, whole terms in the user's order, as many
as fit ``max_chars``. Whisper copies its prompt's style, and this form was the one that kept
the finals' own punctuation on the shared clips (tiny.en, short window, greedy): without the
final period the decode ended on a comma ("Abbie,"), separated by spaces it lost its commas
("Not at this particular case Tom apologized"), one term per sentence cut an utterance short.

Recitation: with a vocabulary in its prompt Whisper sometimes writes the list itself (on
silence, noise or a clipped word). `recites` flags a text that is mostly list entries: the
policy then retries without the vocabulary (`engine.core.ladder`, flag "prompt_echo").
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

from engine.core.agreement import comparable

SEPARATOR = ", "
# Three list entries back to back in the list's own order is a recital, not dictation.
RECITED_RUN = 3


def render(terms: Sequence[str], max_chars: int) -> str | None:
    """``terms`` joined as one short text of at most ``max_chars`` (whole terms only, in order),
    or None when none fits."""
    out: list[str] = []
    used = 1  # the closing period
    for term in terms:
        term = " ".join(term.split())
        if not term:
            continue
        cost = len(term) + (len(SEPARATOR) if out else 0)
        if used + cost > max_chars:
            break
        out.append(term)
        used += cost
    if not out:
        return None
    text = SEPARATOR.join(out)
    return text if text[-1] in ".!?" else text + "."


def terms_of(hotwords: str | None) -> list[tuple[str, ...]]:
    """The entries of a rendered list, each as its comparable words."""
    if not hotwords:
        return []
    entries = [tuple(comparable(w) for w in part.split()) for part in hotwords.split(",")]
    return [tuple(w for w in e if w) for e in entries if any(e)]


def recites(hotwords: str | None, text: str) -> bool:
    """``text`` recites the vocabulary: it holds ``RECITED_RUN`` entries back to back in the
    list's order, or it is made of list entries only, at least two different ones."""
    entries = terms_of(hotwords)
    words = [w for w in (comparable(w) for w in text.split()) if w]
    if not entries or not words:
        return False
    found: list[int] = []  # index of the entry matched at each step
    i = 0
    covered = 0
    while i < len(words):
        match = next((k for k, e in enumerate(entries)
                      if tuple(words[i:i + len(e)]) == e), None)
        if match is None:
            found.append(-1)
            i += 1
            continue
        found.append(match)
        covered += len(entries[match])
        i += len(entries[match])
    if covered == len(words) and len({k for k in found if k >= 0}) >= 2:
        return True
    run = 1
    for previous, current in zip(found, found[1:], strict=False):
        run = run + 1 if previous >= 0 and current == previous + 1 else 1
        if run >= RECITED_RUN:
            return True
    return False


# A heard word at least this close (difflib ratio) to a word of a term makes the term relevant:
# "Concorde" ~ "Concord" 0.93, "Abigail" = "Abigail", "Montreal" = "Montreal".
SIMILAR = 0.75
MIN_WORD = 3  # shorter words ("me", "to") say nothing about which term was meant


def by_relevance(terms: Sequence[str], heard: str) -> tuple[str, ...]:
    """``terms`` with those that sound like a word of ``heard`` (the utterance's latest
    partial) moved first, each group in the user's order. A short utterance has room for a few
    terms only (`share`): this way they are the ones it is likely to need."""
    said = {w for w in (comparable(x) for x in heard.split()) if len(w) >= MIN_WORD}
    if not said or not terms:
        return tuple(terms)

    def close(word: str) -> bool:
        for other in said:
            matcher = SequenceMatcher(None, word, other)
            if (matcher.real_quick_ratio() >= SIMILAR and matcher.quick_ratio() >= SIMILAR
                    and matcher.ratio() >= SIMILAR):
                return True
        return False

    first = [t for t in terms if any(close(w) for w in (comparable(x) for x in t.split())
                                     if len(w) >= MIN_WORD)]
    chosen = set(first)
    return (*first, *(t for t in terms if t not in chosen))


# The most of a decode's prompt room the vocabulary takes: the rest stays for the recent text,
# which carries the style (case, punctuation) Whisper copies.
VOCABULARY_MAX_CHARS = 200
MIN_PROMPT_CHARS = 12  # less room than this left for recent text: no recent text


def share(terms: Sequence[str], max_chars: int) -> tuple[str | None, int | None]:
    """Split a decode's prompt room of ``max_chars`` (`engine.core.policy`: in proportion to
    the audio, as a short window's token budget requires) between the vocabulary and the
    recent text: the rendered vocabulary, and the characters left for recent text (None:
    none). Without terms the recent text keeps all the room."""
    hotwords = render(terms, min(max_chars, VOCABULARY_MAX_CHARS)) if terms else None
    if hotwords is None:
        return None, max_chars
    left = max_chars - len(hotwords) - 1
    return hotwords, left if left >= MIN_PROMPT_CHARS else None


# What one session may send (hostile clients: engine.wire.protocol refuses more). A decode
# only ever uses the first VOCABULARY_MAX_CHARS of it; the rest waits for a longer utterance.
MAX_TERMS = 200
MAX_TERM_CHARS = 100


def checked_terms(raw: object) -> tuple[str, ...]:
    """A vocabulary received from a peer: a list of at most MAX_TERMS strings of at most
    MAX_TERM_CHARS each (whitespace collapsed, empty and repeated ones dropped). ValueError
    says what is wrong."""
    if not isinstance(raw, list) or len(raw) > MAX_TERMS:
        raise ValueError(f"'vocabulary' must be a list of at most {MAX_TERMS} strings")
    out: list[str] = []
    for item in raw:
        if not isinstance(item, str) or len(item) > MAX_TERM_CHARS:
            raise ValueError(f"each 'vocabulary' term must be a string of at most "
                             f"{MAX_TERM_CHARS} characters")
        term = " ".join(item.split())
        if term and term not in out:
            out.append(term)
    return tuple(out)
