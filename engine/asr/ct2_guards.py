"""Judging one Whisper decode attempt: is it silence, plausible text, or a failure to retry?

Pure functions over an `Attempt` (no model): the short-context path fails fast on anything that
looks like a loop or a misread window and the caller falls back to the padded 30 s decode; the
padded path uses Whisper's own temperature-fallback rules (compression ratio, avg log-prob,
no-speech) plus our repeated n-gram check.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.asr.base import Audio
from engine.core.quality import QualityThresholds, check_text, max_ngram_repeats
from engine.types import SAMPLE_RATE

# Whisper's own fallback thresholds (faster-whisper defaults).
LOGPROB_THRESHOLD = -1.0
NO_SPEECH_THRESHOLD = 0.6
COMPRESSION_THRESHOLD = 2.4
NO_SPEECH_STRICT_THRESHOLD = 0.8
LOGPROB_STRICT_THRESHOLD = -0.5

# Token budget for a short window: fast speech is ~4 words/s, ~1.3 tokens/word, plus two
# timestamps per segment; 10 tokens/s with a floor leaves room for that and none for a loop.
TOKENS_PER_SECOND_CAP = 10.0
MIN_TOKEN_BUDGET = 16
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
    return max(MIN_TOKEN_BUDGET, int(np.ceil(duration_s * TOKENS_PER_SECOND_CAP)) + 8)


def restart_index(words: list[str]) -> int | None:
    """Where a runaway decode starts over from its own beginning, as a word index, or None.

    On a short window Whisper often transcribes the chunk correctly and then, not knowing where
    the window ends, starts again from the first word ("Go forward ten meters. Go forward ten
    meters. Go...") until the token budget stops it. Only call this on truncated output: a
    decode that ended by itself may repeat words because the speaker did.
    """
    # Compare words without case and punctuation; punctuation-only "words" are skipped.
    keyed = [(i, "".join(ch for ch in w.lower() if ch.isalnum())) for i, w in enumerate(words)]
    keyed = [(i, key) for i, key in keyed if key]
    keys = [key for _, key in keyed]
    for p in range(RESTART_MIN_WORDS, len(keys)):
        k = min(RESTART_MATCH_WORDS, p)
        # A unit of one repeated word ("word word word") is left to the repeats check.
        if keys[p:p + k] == keys[:k] and len(set(keys[:p])) > 1:
            return keyed[p][0]
    return None


def is_silence(attempt: Attempt) -> bool:
    """Whisper's no-speech rule (the model says silence and is not confident in any text), plus
    a stricter one: Whisper keeps "You" on digital silence (no-speech 0.94, log-prob -0.94)
    because the log-prob is just above -1; when the model is that sure there is no speech, only
    confident text counts."""
    if not attempt.text.strip():
        return True
    if attempt.no_speech_prob > NO_SPEECH_THRESHOLD and attempt.avg_logprob < LOGPROB_THRESHOLD:
        return True
    return (attempt.no_speech_prob > NO_SPEECH_STRICT_THRESHOLD
            and attempt.avg_logprob < LOGPROB_STRICT_THRESHOLD)


def padded_needs_retry(attempt: Attempt, thresholds: QualityThresholds) -> bool:
    """faster-whisper's temperature-fallback rule plus a repeated n-gram check."""
    if is_silence(attempt):
        return False
    if attempt.compression_ratio > COMPRESSION_THRESHOLD:
        return True
    if max_ngram_repeats(attempt.text, thresholds.ngram_sizes) > thresholds.max_ngram_repeats:
        return True
    return attempt.avg_logprob < LOGPROB_THRESHOLD


def short_failure(attempt: Attempt, audio: Audio, thresholds: QualityThresholds, *,
                  timestamp_cues: bool = False) -> str | None:
    """Why a short-context attempt must not be trusted (None when it may be kept).

    Reasons: "truncated" (hit the token budget: a loop), "past_end" (timestamps beyond the real
    audio), "early_end" (text stops while speech goes on), or a quality flag from
    engine.core.quality ("compression", "repeats", "wpm_high", "logprob", "no_speech"...).
    """
    duration_s = len(audio) / SAMPLE_RATE
    if attempt.truncated:
        return "truncated"
    flags = check_text(attempt.text, duration_s, avg_logprob=attempt.avg_logprob,
                       no_speech_prob=attempt.no_speech_prob, thresholds=thresholds)
    if flags:
        return flags[0]
    last = attempt.last_timestamp_s if timestamp_cues else None
    if last is not None and last > duration_s + PAST_END_TOLERANCE_S:
        return "past_end"
    if last is not None and _speech_after(audio, last):
        return "early_end"
    return None


def _speech_after(audio: Audio, end_s: float) -> bool:
    """Does the audio after ``end_s`` hold a long, loud tail (compared with the whole chunk)?"""
    start = int(end_s * SAMPLE_RATE)
    if len(audio) - start < EARLY_END_TAIL_S * SAMPLE_RATE:
        return False
    tail_rms = float(np.sqrt(np.mean(np.square(audio[start:], dtype=np.float64))))
    all_rms = float(np.sqrt(np.mean(np.square(audio, dtype=np.float64))))
    return all_rms > 0 and tail_rms >= EARLY_END_ENERGY_RATIO * all_rms
