"""Text statistics behind the quality checks, and their thresholds (sans-I/O, pure functions).

The checks themselves, and what to do when a decode fails them, are engine.core.ladder's; this
module holds the measurements (compression ratio, words per minute, repeated n-grams) that the
ladder, the long-form stitcher and the CTranslate2 runner share.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

_WORD_RE = re.compile(r"[\w']+", re.UNICODE)


@dataclass(frozen=True)
class QualityThresholds:
    compression_ratio: float = 2.4
    logprob: float = -1.0
    no_speech: float = 0.6
    min_wpm: float = 0.0  # only enforced on chunks long enough to judge (min_seconds_for_wpm)
    max_wpm: float = 330.0
    min_seconds_for_wpm: float = 1.5
    max_ngram_repeats: int = 3  # an n-gram (n=1..4 words... see repeated_ngram) seen more than this
    ngram_sizes: tuple[int, ...] = (2, 3, 4, 5)
    # The low-confidence rung (engine.core.ladder): a greedy decode whose worst word or average
    # log-probability is below these is decoded again with beam 5. Beam gains where a word is
    # unsure, so the worst word decides; the average log-probability did not predict a gain on
    # the clips nor on long-form chunks, and -0.85 keeps its rung for audio harder than ours
    # (the verse reading of issue 12) at about no cost on ours (figures: docs/evidence.md).
    # Long-form
    # chunks turn the worst-word rule off (its cost: engine.longform.retry.long_form_thresholds).
    confident_logprob: float = -0.85
    confident_word_prob: float = 0.2

    def __post_init__(self) -> None:
        if self.compression_ratio <= 1.0:
            raise ValueError("compression_ratio threshold must be > 1")
        if self.max_wpm <= self.min_wpm:
            raise ValueError("max_wpm must exceed min_wpm")


def compression_ratio(text: str) -> float:
    """len(utf8) / len(zlib(utf8)); Whisper's loop detector. Empty text scores 0."""
    data = text.encode("utf-8")
    if not data:
        return 0.0
    return len(data) / len(zlib.compress(data))


def words_of(text: str) -> list[str]:
    return [w.lower() for w in _WORD_RE.findall(text)]


def words_per_minute(text: str, seconds: float) -> float:
    if seconds <= 0:
        return 0.0
    return len(words_of(text)) * 60.0 / seconds


def max_ngram_repeats(text: str, sizes: tuple[int, ...] = (2, 3, 4, 5)) -> int:
    """Largest count of any n-gram (for n in ``sizes``) occurring back to back in ``text``."""
    words = words_of(text)
    worst = 1 if words else 0
    for n in sizes:
        if len(words) < 2 * n:
            continue
        for start in range(len(words) - n + 1):
            gram = words[start:start + n]
            run = 1
            pos = start + n
            while words[pos:pos + n] == gram:
                run += 1
                pos += n
            worst = max(worst, run)
    return worst
