"""Scoring helpers shared by tests and benchmarks: manifests, normalisation, WER/CER.

Uses jiwer and whisper-normalizer (the ``dev`` extra), imported lazily.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.errors import missing_dependency

CER_LANGUAGES = frozenset({"zh", "ja", "ko"})
FILLERS = frozenset({"uh", "um", "uhm", "umm", "hmm", "mm", "mhm", "ah", "er", "erm", "yknow"})
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
# A lone digit: not part of a longer number, a decimal, a time, an amount or a percentage.
_WORDLIKE = re.compile(r"\w")
_PARENTHESES = re.compile(r"[()]")
_LONE_DIGIT = re.compile(r"(?<![\w.,:$£€-])(\d)(?![\w%]|[.,:]\d)")


@dataclass(frozen=True)
class ManifestEntry:
    path: Path
    text: str
    language: str
    kind: str
    duration_s: float


def read_manifest(manifest: str | os.PathLike[str]) -> list[ManifestEntry]:
    """Entries of a JSONL manifest (fields: file, text, language, kind, duration_s); ``file`` is
    relative to the manifest's folder unless absolute."""
    root = Path(manifest).resolve().parent
    entries = []
    with open(manifest, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            path = Path(row["file"])
            entries.append(ManifestEntry(
                path=path if path.is_absolute() else root / path, text=row["text"],
                language=row.get("language", "en"), kind=row.get("kind", "short"),
                duration_s=float(row.get("duration_s", 0.0)),
            ))
    return entries


def normalize(text: str, language: str = "en") -> str:
    """Whisper's English normaliser (case, punctuation, numbers, spellings), minus fillers and
    leftover punctuation, with lone digits spelled out first (`spell_lone_digits`); a basic
    normaliser for other languages. Words in parentheses are kept (`spoken_parentheses`)."""
    try:
        if language == "en":
            from whisper_normalizer.english import EnglishTextNormalizer as Norm
        else:
            from whisper_normalizer.basic import BasicTextNormalizer as Norm
    except ImportError as exc:
        raise missing_dependency("whisper-normalizer", "dev") from exc
    text = spoken_parentheses(text)
    if language == "en":
        text = spell_lone_digits(text)
    words = Norm()(text).split()
    # Whisper's normaliser leaves an ellipsis as a "." word: punctuation is not a word.
    return " ".join(w for w in words if w not in FILLERS and _WORDLIKE.search(w))


def spoken_parentheses(text: str) -> str:
    """Parentheses dropped, their words kept. Whisper's normalisers delete text in parentheses
    (and brackets) as non-speech tags, but a reference's parentheses hold spoken words: the
    long LJ reading says "(which also was printed at Maintz by Peter Schoeffer in the year
    fourteen sixty-two)", and deleting them counted 13 words (2.3 points) as insertions for
    every system. Our decodes never write parentheses (faster-whisper suppresses them as
    non-speech tokens); bracketed tags ("[BLANK_AUDIO]") are still removed."""
    return _PARENTHESES.sub(" ", text)


def spell_lone_digits(text: str) -> str:
    """"1, 2, 3" -> "one, two, three" before Whisper's English normaliser, which joins spoken
    digits into one number ("one two three" -> "123") but leaves written ones apart
    ("1, 2, 3" -> "one 2 3"): the same words would otherwise score as errors depending on how
    the decoder chose to write them. Applied to reference and hypothesis alike."""
    return _LONE_DIGIT.sub(lambda m: DIGIT_WORDS[int(m.group(1))], text)


def error_rate(references: Sequence[str], hypotheses: Sequence[str], language: str = "en") -> float:
    """Corpus WER (CER for zh/ja/ko) after normalising both sides; 0..1 (can exceed 1)."""
    try:
        import jiwer
    except ImportError as exc:
        raise missing_dependency("jiwer", "dev") from exc
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    refs = [normalize(r, language) for r in references]
    hyps = [normalize(h, language) for h in hypotheses]
    if language in CER_LANGUAGES:
        refs = [r.replace(" ", "") for r in refs]
        hyps = [h.replace(" ", "") for h in hyps]
        return float(jiwer.cer(refs, hyps))
    pairs = [(r, h) for r, h in zip(refs, hyps, strict=True) if r]
    return float(jiwer.wer([r for r, _ in pairs], [h for _, h in pairs]))


def formatted(text: str) -> bool:
    """Whether a reference text carries case and punctuation (LibriSpeech's upper-case,
    unpunctuated references don't): only those can score a formatted WER."""
    return any(c.isupper() for c in text) and any(c.islower() for c in text) and any(
        c in text for c in ".,?!;:")


def formatted_tokens(text: str) -> list[str]:
    """Words as the user sees them: case and punctuation kept, attached to their word; only
    spacing and typographic quote/dash variants are unified."""
    for fancy, plain in (("\u2019", "'"), ("\u2018", "'"), ("\u201c", '"'), ("\u201d", '"'),
                         ("\u2014", "-"), ("\u2013", "-")):
        text = text.replace(fancy, plain)
    return text.split()


def formatted_error_rate(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """Corpus WER on formatted text (case and punctuation kept: "you," != "you", "And" !=
    "and"), over the references that carry formatting (`formatted`); nan when none does.
    Beside the normalised WER it shows what the user actually gets."""
    try:
        import jiwer
    except ImportError as exc:
        raise missing_dependency("jiwer", "dev") from exc
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    pairs = [(" ".join(formatted_tokens(r)), " ".join(formatted_tokens(h)))
             for r, h in zip(references, hypotheses, strict=True) if formatted(r)]
    if not pairs:
        return float("nan")
    return float(jiwer.wer([r for r, _ in pairs], [h for _, h in pairs]))


def english(entries: Iterable[ManifestEntry], kinds: Iterable[str] = ("short",)) -> list[ManifestEntry]:
    wanted = set(kinds)
    return [e for e in entries if e.language == "en" and e.kind in wanted]
