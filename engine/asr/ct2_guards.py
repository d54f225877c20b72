"""Judging one Whisper decode attempt: is it silence, plausible text, or a failure to retry?

Pure functions over an `Attempt` (no model). The checks are engine.core.ladder's, the same every
caller uses: the short-context path falls back to the padded 30 s decode on any failed check
(`ladder.SHORT_PATH`) or on the runner-internal signs of a misread window (token budget hit,
restart, timestamps past the end, early end); the padded path uses Whisper's temperature-
fallback rule (compression ratio, avg log-prob, no-speech) plus the ladder's n-gram check.
The low-confidence rung (beam 5) is the caller's: the runner decodes with the options it gets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.core import ladder
from engine.core.ladder import SHORT_PATH, QualityThresholds, Rung
from engine.core.quality import words_of
from engine.types import SAMPLE_RATE, Audio

# Token budget for a short window. Padded decodes of the shared English clips and cuts need at
# most 5.6 tokens/s (timestamps included); 8 tokens/s plus 6 leaves room for faster speech and
# little for a loop, whose every extra token costs decoder time.
TOKENS_PER_SECOND_CAP = 8.0
MIN_TOKEN_BUDGET = 16
# Whisper's own fallback thresholds (faster-whisper defaults), as the ladder's defaults; the
# runner's choice among fallback attempts (ct2_batch._choose) uses them.
LOGPROB_THRESHOLD = QualityThresholds().logprob
COMPRESSION_THRESHOLD = QualityThresholds().compression_ratio
PADDED_WINDOW_S = 30.0
# Whisper's temperature-fallback reasons, plus the ladder's repeated n-gram check.
PADDED_RETRY_FLAGS = frozenset({"compression", "repeats", "logprob"})
# Below this RMS (about -60 dBFS) a chunk is digital or near-digital silence.
TRUSTED_SILENCE_RMS = 1e-3
# A loop restart is recognised when the first words (at least two) come back after at least two.
RESTART_MIN_WORDS = 2
RESTART_MATCH_WORDS = 3
# A last timestamp this far past the real audio end means the model read padding as speech.
PAST_END_TOLERANCE_S = 0.6
# Text that stops this long before the audio ends, while that tail still carries speech-level
# energy, means words were dropped.
EARLY_END_TAIL_S = 1.2
EARLY_END_ENERGY_RATIO = 0.35


@dataclass(frozen=True)
class Attempt:
    """One generate() result for one item, with Whisper's quality statistics."""

    tokens: tuple[int, ...]  # generated ids (text and timestamps, no prompt, no EOT)
    text: str
    avg_logprob: float
    no_speech_prob: float
    compression_ratio: float
    temperature: float
    truncated: bool  # stopped by the token budget, not by end-of-text
    last_timestamp_s: float | None  # the last timestamp token's time, if any
    trimmed: bool = False  # a runaway loop was cut back to its first pass (see restart_index)


def token_budget(duration_s: float) -> int:
    """Most new tokens a short window of ``duration_s`` may produce."""
    return max(MIN_TOKEN_BUDGET, int(np.ceil(duration_s * TOKENS_PER_SECOND_CAP)) + 6)


def restart_index(words: list[str]) -> int | None:
    """Where a runaway decode starts over from its own beginning, as a word index, or None.

    On a short window Whisper often transcribes the chunk correctly and then, not knowing where
    the window ends, starts again from the first word ("Go forward ten meters. Go forward ten
    meters. Go...") until the token budget stops it. Only call this on truncated output: a
    decode that ended by itself may repeat words because the speaker did.
    """
    return _restart(_keyed(words))


def repeat_index(words: list[str]) -> int | None:
    """Where a decode falls into a loop, as a word index (its first repeat), or None: a run of
    words said again right after itself, three times or more for a run of one or two words
    (people say "that that" or "in the, in the"), twice or more for a longer one ("... as an
    example, that as an example, that as an example,"); or the text starting over from its
    first words (`restart_index`). Only call this on a decode that failed as a loop."""
    keyed = _keyed(words)
    return min((i for i in (_tandem(keyed), _restart(keyed)) if i is not None), default=None)


def _keyed(words: list[str]) -> list[tuple[int, str]]:
    """(index, key) of each word with a letter or digit: words compared without case and
    punctuation; punctuation-only "words" are skipped."""
    keyed = ((i, "".join(ch for ch in w.lower() if ch.isalnum())) for i, w in enumerate(words))
    return [(i, key) for i, key in keyed if key]


def _restart(keyed: list[tuple[int, str]]) -> int | None:
    keys = [key for _, key in keyed]
    for p in range(RESTART_MIN_WORDS, len(keys)):
        k = min(RESTART_MATCH_WORDS, p)
        # A unit of one repeated word ("word word word") is left to the repeats check.
        if keys[p:p + k] == keys[:k] and len(set(keys[:p])) > 1:
            return keyed[p][0]
    return None


def _tandem(keyed: list[tuple[int, str]]) -> int | None:
    """The first word that repeats the run of words right before it (3 copies in all for a
    run of 1-2 words, 2 for a longer one), as a word index."""
    keys = [key for _, key in keyed]
    for p in range(1, len(keys)):
        for unit in range(1, p + 1):
            copies, q = 1, p
            while keys[q:q + unit] == keys[p - unit:p]:
                copies, q = copies + 1, q + unit
            if copies >= (3 if unit <= 2 else 2):
                return keyed[p][0]
    return None


def is_silence(attempt: Attempt) -> bool:
    """Empty text, or the ladder's no-speech rule (Whisper's, plus a stricter one for text the
    model is sure is not speech: "You" on digital silence at no-speech 0.94, log-prob -0.94)."""
    if not attempt.text.strip():
        return True
    return ladder.is_no_speech(attempt.no_speech_prob, attempt.avg_logprob)


def padded_needs_retry(attempt: Attempt, thresholds: QualityThresholds) -> bool:
    """faster-whisper's temperature-fallback rule (compression ratio from the tokens, average
    log-prob) plus the ladder's repeated n-gram check; silence is never retried."""
    if is_silence(attempt):
        return False
    if attempt.compression_ratio > thresholds.compression_ratio:
        return True
    # The attempt does not know its audio's length: judged as the full window, only the
    # checks that do not depend on the speaking rate count (no words-per-minute rules).
    flags = set(_flags(attempt, PADDED_WINDOW_S, thresholds))
    return bool(flags & PADDED_RETRY_FLAGS)


def short_failure(attempt: Attempt, audio: Audio, thresholds: QualityThresholds, *,
                  timestamp_cues: bool = False) -> str | None:
    """Why a short-context attempt must not be trusted (None when it may be kept).

    Reasons: "truncated" (hit the token budget: a loop), "past_end" (timestamps beyond the real
    audio), "early_end" (text stops while speech goes on), "restart" (the text starts over from
    its first words), or the first flag of engine.core.ladder.check ("compression", "repeats",
    "wpm_high", "logprob", "no_speech"...) when the ladder's short-path rung for
    them is the padded window.
    """
    duration_s = len(audio) / SAMPLE_RATE
    if attempt.truncated:
        return "truncated"
    flags = _flags(attempt, duration_s, thresholds)
    if ladder.next_rung(flags, (), seconds=duration_s, greedy=False,
                        ladder=SHORT_PATH) is not Rung.ACCEPT:
        return flags[0]
    if restart_index(words_of(attempt.text)) is not None:
        # Beam search often stops a loop after one repeat ("You know X. You know X."): too few
        # repeats for the n-gram check, yet the text starts over. It may be real speech, so
        # the padded window decides.
        return "restart"
    last = attempt.last_timestamp_s if timestamp_cues else None
    if last is not None and last > duration_s + PAST_END_TOLERANCE_S:
        return "past_end"
    if last is not None and _speech_after(audio, last):
        return "early_end"
    return None


def _flags(attempt: Attempt, seconds: float, thresholds: QualityThresholds) -> tuple[str, ...]:
    return ladder.check(attempt.text, seconds, avg_logprob=attempt.avg_logprob,
                        no_speech_prob=attempt.no_speech_prob, thresholds=thresholds)


def rms(audio: Audio) -> float:
    return float(np.sqrt(np.mean(np.square(audio, dtype=np.float64)))) if len(audio) else 0.0


def _speech_after(audio: Audio, end_s: float) -> bool:
    """Does the audio after ``end_s`` hold a long, loud tail (compared with the whole chunk)?"""
    start = int(end_s * SAMPLE_RATE)
    if len(audio) - start < EARLY_END_TAIL_S * SAMPLE_RATE:
        return False
    whole = rms(audio)
    return whole > 0 and rms(audio[start:]) >= EARLY_END_ENERGY_RATIO * whole
