"""One quality ladder for every decode: the checks a decoded text must pass, and what to do next
when it fails them (sans-I/O, pure functions).

Used by the live finals (engine.core.policy), the server (the same policy), long-form chunks
(engine.longform.retry) and the CTranslate2 short path (engine.asr.ct2_guards), and by single
files (engine.files) for flags and the text-on-silence drop.

    flags = check(text, seconds, avg_logprob=..., no_speech_prob=..., prompt=..., greedy=...)
    rung = next_rung(flags, tried, seconds=..., greedy=..., ladder=LONG_FORM)

The rungs, in the order a caller offers them (each caller offers the ones it can run):

- ``BEAM``: a greedy decode whose only failures are confidence flags (``low_confidence``: average
  log-probability or worst word probability under the measured thresholds; ``logprob``:
  Whisper's own -1.0 rule) is decoded again with beam 5, same window and prompt. Greedy is the
  fast default everywhere; beam search is where its misreadings of hard audio get fixed.
- ``PADDED``: loop-like text, a recited prompt or an early stop is decoded again on the padded
  30 s window without a prompt (what a short window or a prompt starts, the padded window
  without one usually does not).
- ``HOTTER``: the padded window, no prompt, sampled at higher temperatures: sampling breaks the
  deterministic loop greedy or beam decoding fell into (Whisper's temperature fallback).
- ``SPLIT``: cut the chunk at its quietest point and decode the halves (less room to loop).
- give up: ``DROP`` when every failure says "this is not speech" (no_speech, text_on_silence),
  ``FLAG`` (keep the text, marked with its flags) otherwise; ``ACCEPT`` when only the advisory
  ``low_confidence`` remains (the beam decode was its remedy).

Where the four old ladders disagreed, these rules won (and why):
- no-speech: Whisper's rule (no-speech > 0.6 and log-prob < -1) *or* the CTranslate2 runner's
  stricter one (no-speech > 0.8 and log-prob < -0.5), everywhere: Whisper keeps "You" on digital
  silence (0.94 / -0.94), which the runner already dropped but the policy and files did not.
- loops: the policy's word-level loop checks (one word repeated faster than anyone speaks, a
  phrase said twice back to back, a 6-gram said twice) stay with live finals (``word_loops``):
  over a long-form chunk or a padded decode (up to 30 s of reading) a repeated phrase is as
  likely a refrain as a loop (verse), and long-form has its own measured remedy for a phrase
  said twice (a timed re-decode, engine.longform.pipeline). A recited prompt is checked
  wherever a prompt is given.
- low log-probability: long-form retried it hotter (Whisper's -1.0 rule), the runner's short
  path fell back to the padded window, live finals only marked it. Now a greedy decode that is
  unsure takes the beam rung first (long-form and live finals; the runner keeps its padded
  fallback, as it decodes with the options it is given), and only long-form, which offers
  ``HOTTER``, goes on to sample when Whisper's rule still fails after beam search.
- live finals, retry rule: one retry, as before; a low-confidence greedy final now takes it
  too (beam 5 on the same window and prompt), except while other finals wait (behind: greedy
  stays the rule, as for first attempts).

The low-confidence thresholds (QualityThresholds.confident_word_prob 0.2, confident_logprob
-0.85) were chosen on greedy vs beam-5 decodes of the 26 shared English clips and the 231 s file;
the reason is next to them in engine.core.quality, the figures in docs/evidence.md. Long-form
chunks use the log-probability rule only: the worst-word rule cost too much speed there
(engine.longform.retry).
- silence evidence: VAD probabilities where the caller has them (long-form: the chunk's best
  speech probability under 0.3), else energy (single files: under -60 dBFS) together with the
  model's no-speech probability, because energy alone cannot tell a quiet voice from a hum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from engine.core.agreement import comparable
from engine.core.hotwords import recites
from engine.core.prompt import STYLE_ANCHORS
from engine.core.quality import (
    QualityThresholds,
    compression_ratio,
    max_ngram_repeats,
    words_of,
    words_per_minute,
)
from engine.types import DecodeOptions

__all__ = [
    "CONFIDENCE_FLAGS", "LIVE", "LONG_FORM", "LOOP_FLAGS", "SHORT_PATH", "SILENCE_FLAGS",
    "Ladder", "QualityThresholds", "Rung", "check", "drops", "is_greedy", "is_no_speech",
    "is_silent", "next_rung",
    "prompt_echo", "word_loop",
]

LOOP_FLAGS = frozenset({"compression", "repeats", "wpm_high", "word_loop", "prompt_echo",
                        "early_end"})
SILENCE_FLAGS = frozenset({"no_speech", "text_on_silence"})
CONFIDENCE_FLAGS = frozenset({"low_confidence", "logprob"})

ECHO_WORDS = 6  # a text repeating this many words of its prompt (or of itself) is suspect
# One word repeated back to back faster than anyone says it ("1 1 1 1 1 1", "three three" on
# a 1 s chunk), while "words, words, words, words" over 4 s is speech: a run counts as a loop
# when it has more than WORD_LOOP_PER_S words per second of audio, or >= WORD_LOOP_MAX at all.
WORD_LOOP_PER_S = 1.5
WORD_LOOP_MAX = 8
# Whisper keeps "You" on digital silence (no-speech 0.94, log-prob -0.94): when the model is
# this sure there is no speech, only confident text counts.
NO_SPEECH_STRICT = 0.8
LOGPROB_STRICT = -0.5
# -60 dBFS RMS: below any speech in the shared corpus (whispered speech there is about -55 dBFS).
SILENCE_RMS = 10 ** (-60 / 20)
# Audio this short holds a syllable or two: Whisper fills a 0.1 s snippet with "Thank you." or
# "Thank you very much." (flags: "logprob" or "no_speech" or none). More words than twice the
# fastest speaking rate allows (max_wpm), and at least 2, fail "too_short": dropped, no retry.
TOO_SHORT_S = 0.5


class Rung(Enum):
    ACCEPT = "accept"
    BEAM = "beam"
    PADDED = "padded"
    HOTTER = "hotter"
    SPLIT = "split"
    FLAG = "flag"
    DROP = "drop"


RETRIES = (Rung.BEAM, Rung.PADDED, Rung.HOTTER, Rung.SPLIT)


@dataclass(frozen=True)
class Ladder:
    """The retries one caller can run, in the order it tries them, and how many in all."""

    rungs: tuple[Rung, ...]
    max_retries: int
    min_split_s: float = 4.0  # halves shorter than this are too short to read reliably

    def __post_init__(self) -> None:
        if any(r not in RETRIES for r in self.rungs) or self.max_retries < 0:
            raise ValueError("rungs must be retries (beam, padded, hotter, split), max >= 0")


# Live finals: one retry (latency), beam for low confidence, else the padded window.
LIVE = Ladder((Rung.BEAM, Rung.PADDED), max_retries=1)
# Long-form chunks: beam, then hotter, then split (each at most once).
LONG_FORM = Ladder((Rung.BEAM, Rung.HOTTER, Rung.SPLIT), max_retries=3)
# The runner's short window: anything suspect falls back to the padded window.
SHORT_PATH = Ladder((Rung.PADDED,), max_retries=1)


def check(
    text: str,
    seconds: float,
    *,
    avg_logprob: float = 0.0,
    no_speech_prob: float = 0.0,
    min_word_prob: float | None = None,
    prompt: str | None = None,
    hotwords: str | None = None,
    word_loops: bool = False,
    greedy: bool = False,
    max_speech_prob: float | None = None,
    silence_probability: float = 0.3,
    thresholds: QualityThresholds | None = None,
) -> tuple[str, ...]:
    """Names of the checks ``text`` (decoded from ``seconds`` of audio) fails; () = plausible.

    Flags: "compression", "wpm_high"/"wpm_low", "too_short" (more words than audio under
    `TOO_SHORT_S` can hold), "repeats", "word_loop" (only with
    ``word_loops``), "prompt_echo" (text recited from ``prompt``, or the vocabulary list
    ``hotwords`` recited: `engine.core.hotwords.recites`) (loops),
    "no_speech" (the model says silence), "logprob" (Whisper's -1.0 rule), "low_confidence" (only
    for ``greedy`` decodes: below ``thresholds.confident_logprob`` or a word below
    ``thresholds.confident_word_prob``), "text_on_silence" (``max_speech_prob``, the VAD's best
    speech probability over the audio, under ``silence_probability``).
    """
    t = thresholds or QualityThresholds()
    if not text.strip():
        return ()
    flags: list[str] = []
    if compression_ratio(text) > t.compression_ratio:
        flags.append("compression")
    flags.extend(_rate_flags(text, seconds, t))
    if max_ngram_repeats(text, t.ngram_sizes) > t.max_ngram_repeats:
        flags.append("repeats")
    loops = word_loop(text, seconds) if word_loops else set()
    echo = (prompt_echo(prompt, text, pieces=prompt in STYLE_ANCHORS.values())
            | prompt_echo(hotwords, text, pieces=False))
    if hotwords and recites(hotwords, text):
        echo.add("prompt_echo")
    flags.extend(sorted(loops | echo))
    if is_no_speech(no_speech_prob, avg_logprob, t):
        flags.append("no_speech")
    elif avg_logprob < t.logprob:
        flags.append("logprob")
    if greedy and (avg_logprob < t.confident_logprob or (
            min_word_prob is not None and min_word_prob < t.confident_word_prob)):
        flags.append("low_confidence")
    if max_speech_prob is not None and max_speech_prob < silence_probability:
        flags.append("text_on_silence")
    return tuple(flags)


def next_rung(flags: Sequence[str], tried: Sequence[Rung], *, seconds: float, greedy: bool,
              ladder: Ladder) -> Rung:
    """The next rung for a decode with ``flags`` after the retries ``tried`` (oldest first).

    ``greedy``: the decode was greedy (beam 1 at temperature 0), so beam search may help.
    """
    failed = set(flags)
    if not failed:
        return Rung.ACCEPT
    if "too_short" in failed:
        return Rung.DROP  # no window or temperature reads more words out of the audio
    if len(tried) < ladder.max_retries:
        for rung in ladder.rungs:
            if rung not in tried and _fits(rung, failed, seconds, greedy, ladder):
                return rung
    if failed <= {"low_confidence"}:
        return Rung.ACCEPT
    return Rung.DROP if failed <= SILENCE_FLAGS else Rung.FLAG


def drops(flags: Sequence[str]) -> bool:
    """Text to throw away: it fails only "this is not speech" checks, or it holds more words
    than its audio could (``too_short``); other failures keep the text, flagged."""
    return bool(flags) and (set(flags) <= SILENCE_FLAGS or "too_short" in flags)


def _fits(rung: Rung, failed: set[str], seconds: float, greedy: bool, ladder: Ladder) -> bool:
    if rung is Rung.BEAM:
        return greedy and failed <= CONFIDENCE_FLAGS
    if rung is Rung.PADDED:
        return bool(failed & LOOP_FLAGS)
    whisper_rule = bool(failed - {"low_confidence"})  # the advisory flag alone never samples
    if rung is Rung.HOTTER:
        return whisper_rule
    return whisper_rule and seconds >= 2 * ladder.min_split_s  # SPLIT


def is_greedy(options: DecodeOptions) -> bool:
    """Greedy decoding (beam 1, temperature 0 first): what the beam rung may improve on."""
    return options.beam_size == 1 and options.temperatures[0] == 0.0


def is_no_speech(no_speech_prob: float, avg_logprob: float,
                 thresholds: QualityThresholds | None = None) -> bool:
    """The model says there is no speech and is not confident in its text (see module notes)."""
    t = thresholds or QualityThresholds()
    if no_speech_prob > t.no_speech and avg_logprob < t.logprob:
        return True
    return no_speech_prob > NO_SPEECH_STRICT and avg_logprob < LOGPROB_STRICT


def is_silent(audio: np.ndarray, no_speech_prob: float,
              thresholds: QualityThresholds | None = None) -> bool:
    """Text decoded here is text on silence: the model doubts speech and the audio is under
    -60 dBFS (the rule for callers without VAD probabilities)."""
    t = thresholds or QualityThresholds()
    if no_speech_prob <= t.no_speech:
        return False
    rms = float(np.sqrt(np.mean(np.square(audio, dtype=np.float64)))) if audio.size else 0.0
    return rms < SILENCE_RMS


def _rate_flags(text: str, seconds: float, t: QualityThresholds) -> list[str]:
    if seconds >= t.min_seconds_for_wpm:
        wpm = words_per_minute(text, seconds)
        if wpm > t.max_wpm:
            return ["wpm_high"]
        return ["wpm_low"] if wpm < t.min_wpm else []
    words, most = len(words_of(text)), seconds * t.max_wpm / 60.0 * 2
    if seconds < TOO_SHORT_S and words > max(1.0, most):
        return ["too_short"]
    if words > max(4.0, most):
        return ["wpm_high"]
    return []


def word_loop(text: str, seconds: float) -> set[str]:
    """Loops the n-gram check misses: one word repeated faster than anyone speaks, a phrase of
    3+ words said twice back to back ("what are you what are you"), or 6+ words said twice."""
    words = [comparable(w) for w in text.split()]
    run = longest = 1
    for previous, word in zip(words, words[1:], strict=False):
        run = run + 1 if word and word == previous else 1
        longest = max(longest, run)
    if longest >= WORD_LOOP_MAX or (longest >= 2 and longest > WORD_LOOP_PER_S * seconds):
        return {"word_loop"}
    for n in range(3, len(words) // 2 + 1):
        for i in range(len(words) - 2 * n + 1):
            if words[i:i + n] == words[i + n:i + 2 * n]:
                return {"word_loop"}
    # A passage recited again further on (a long window's hallucination) repeats a 6-gram.
    grams = [tuple(words[i:i + ECHO_WORDS]) for i in range(len(words) - ECHO_WORDS + 1)]
    if len(set(grams)) < len(grams):
        return {"word_loop"}
    return set()


def prompt_echo(prompt: str | None, text: str, *, pieces: bool = False) -> set[str]:
    """Short windows sometimes make Whisper recite its prompt instead of the audio."""
    if not prompt:
        return set()
    said = [comparable(w) for w in prompt.split()]
    words = [comparable(w) for w in text.split()]
    # A short prompt (the style prompt, "Okay, here it is.") counts as recited when all of it
    # comes back, or when the text is nothing but a piece of it (noise decoded as "Okay."):
    # the retry without a prompt tells a real "Okay." from an echo. (Only for the style
    # prompt: a name of the vocabulary, or a sentence said twice, alone is dictation.)
    if pieces and words and len(said) <= ECHO_WORDS and _contained(words, said):
        return {"prompt_echo"}
    n = min(ECHO_WORDS, len(said)) if pieces and len(said) >= 4 else ECHO_WORDS
    grams = {tuple(said[i:i + n]) for i in range(len(said) - n + 1)}
    if any(tuple(words[i:i + n]) in grams for i in range(len(words) - n + 1)):
        return {"prompt_echo"}
    return set()


def _contained(words: list[str], said: list[str]) -> bool:
    """``words`` appear in ``said`` as one run."""
    n = len(words)
    return any(said[i:i + n] == words for i in range(len(said) - n + 1))
