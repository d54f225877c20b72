"""Per long reading: streamed (committed) captions against the whole file decoded offline.

For each reading: the word lag (final emitted -> the word's end, p50 / p95), WER and formatted
WER of the captions and of the offline decode, the differences (captions minus offline, points)
with their 95 % paired bootstrap interval over the reference's sentences (each error charged to
the sentence its reference word belongs to, as `bench/longform.py` does), and the false
sentence ends: full stops (or ? !) in the captions where the reference ends no sentence.

The sentences are the reference cut at its sentence ends, or the reading's ``pieces`` (the
utterances a speaker reading is built from, `bench/longform.py`) when the reference has no
punctuation; a formatted WER needs a reference with case and punctuation (else nan).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from common import paired_wer, pct
from evaluation import formatted, formatted_tokens, normalize

SENTENCE_END = re.compile(r"[.!?][\"')\]]*$")


def sentence_pieces(reference: str, pieces: Sequence[str] | None = None) -> list[str]:
    """The reference's sentences: ``pieces`` if given, else the text cut after . ! ?"""
    if pieces:
        return [p for p in pieces if p.strip()]
    return [s for s in re.split(r"(?<=[.!?])\s+", reference) if s.strip()]


def piece_errors(pieces: Sequence[str], hypothesis: str,
                 words_of: Callable[[str], list[str]]) -> tuple[list[int], list[int]]:
    """Word errors and reference words per piece: ``hypothesis`` aligned (jiwer) to the pieces'
    words (``words_of``: normalised or formatted tokens) joined, every error charged to the
    piece of its reference word (an insertion to that of the word it precedes)."""
    import jiwer

    owner: list[int] = []
    ref: list[str] = []
    for k, piece in enumerate(pieces):
        tokens = words_of(piece)
        ref += tokens
        owner += [k] * len(tokens)
    errors = [0] * len(pieces)
    hyp = words_of(hypothesis)
    if not hyp or not ref:  # every reference word deleted (none: nothing to charge)
        for k in owner:
            errors[k] += 1
        return errors, [owner.count(k) for k in range(len(pieces))]
    out = jiwer.process_words(" ".join(ref), " ".join(hyp))
    for chunk in out.alignments[0]:
        if chunk.type == "insert":
            errors[owner[min(chunk.ref_start_idx, len(owner) - 1)]] += (
                chunk.hyp_end_idx - chunk.hyp_start_idx)
        elif chunk.type != "equal":  # substitute, delete
            for i in range(chunk.ref_start_idx, chunk.ref_end_idx):
                errors[owner[i]] += 1
    return errors, [owner.count(k) for k in range(len(pieces))]


def normalised_words(text: str) -> list[str]:
    return normalize(text).split()


def _plain(token: str) -> str:
    return re.sub(r"[^\w']", "", token.lower())


def false_sentence_ends(pieces: Sequence[str], hypothesis: str) -> tuple[int, int]:
    """(false ends, ends): the hypothesis's words that end a sentence (. ! ?), and how many of
    them stand where the reference ends no sentence (aligned word by word, case and punctuation
    aside; a word the reference does not have counts with the reference word before it)."""
    import jiwer

    ref: list[str] = []
    ends: set[int] = set()
    for piece in pieces:
        ref += [t for t in (_plain(w) for w in piece.split()) if t]
        ends.add(len(ref) - 1)
    tokens = [(t, _plain(t)) for t in hypothesis.split()]
    tokens = [(t, p) for t, p in tokens if p]
    marked = [i for i, (t, _) in enumerate(tokens) if SENTENCE_END.search(t)]
    if not marked or not ref:
        return (len(marked) if not ref else 0), len(marked)
    at: dict[int, int] = {}  # hypothesis word -> the reference word it stands for
    for chunk in jiwer.process_words(" ".join(ref), " ".join(p for _, p in tokens)
                                      ).alignments[0]:
        for i in range(chunk.hyp_start_idx, chunk.hyp_end_idx):
            at[i] = (chunk.ref_start_idx + i - chunk.hyp_start_idx
                     if chunk.type in ("equal", "substitute") else chunk.ref_start_idx - 1)
    return sum(1 for i in marked if at.get(i, -1) not in ends), len(marked)


def reading_row(name: str, reference: str, pieces: Sequence[str] | None, captions: str,
                offline: str, lags_ms: Sequence[float]) -> dict[str, Any]:
    """One reading's figures (module docstring); WERs in %, differences in points."""
    sentences = sentence_pieces(reference, pieces)
    row: dict[str, Any] = {"file": name, "sentences": len(sentences), "word_lag_ms": pct(lags_ms)}
    e_cap, words = piece_errors(sentences, captions, normalised_words)
    e_off, _ = piece_errors(sentences, offline, normalised_words)
    row["wer"] = paired_wer(e_cap, e_off, words).as_dict()
    if formatted(reference):
        f_cap, f_words = piece_errors(sentences, captions, formatted_tokens)
        f_off, _ = piece_errors(sentences, offline, formatted_tokens)
        row["formatted_wer"] = paired_wer(f_cap, f_off, f_words).as_dict()
    false, marked = false_sentence_ends(sentences, captions)
    false_off, marked_off = false_sentence_ends(sentences, offline)
    row["false_sentence_ends"] = {"captions": false, "captions_ends": marked,
                                  "offline": false_off, "offline_ends": marked_off,
                                  "reference_ends": len(sentences)}
    return row


def print_rows(rows: Sequence[dict[str, Any]], title: str = "per long reading") -> None:
    """A table: captions vs offline per reading (points, [95 % interval])."""
    print(f"\n{title}: captions minus offline (WER points, paired 95 % interval over sentences)")
    print(f"{'reading':34s} {'lag p50/p95 s':>14s} {'WER cap/off %':>14s} {'diff [CI]':>22s} "
          f"{'fWER cap/off %':>15s} {'fdiff [CI]':>22s} {'false ends cap/off':>18s}")
    for r in rows:
        lag = r["word_lag_ms"]
        w = r["wer"]
        f = r.get("formatted_wer")
        fe = r["false_sentence_ends"]
        lag_s = (f"{lag['p50'] / 1000:.2f}/{lag['p95'] / 1000:.2f}" if lag["p50"] is not None
                 else "-")
        ftxt = (f"{f['a']:.1f}/{f['b']:.1f}", f"{f['diff']:+.2f} [{f['ci95'][0]:+.2f}, "
                f"{f['ci95'][1]:+.2f}]") if f else ("-", "-")
        print(f"{r['file'][:34]:34s} {lag_s:>14s} {w['a']:.1f}/{w['b']:.1f}".ljust(64)
              + f"{w['diff']:+.2f} [{w['ci95'][0]:+.2f}, {w['ci95'][1]:+.2f}]".rjust(22)
              + f" {ftxt[0]:>15s} {ftxt[1]:>22s} "
              + f"{fe['captions']}/{fe['offline']} of {fe['captions_ends']}/{fe['offline_ends']}"
              .rjust(18))
