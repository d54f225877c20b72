"""Pure parts of the CTranslate2 chunk decoder: loop guards, token spans, prompt batching."""

from __future__ import annotations

import numpy as np
import pytest

from engine.asr.ct2_guards import (
    Attempt,
    is_silence,
    padded_needs_retry,
    repeat_index,
    restart_index,
    short_failure,
    token_budget,
)
from engine.asr.ct2_passes import equalize_prompts
from engine.asr.ct2_words import (
    TokenSpan,
    WordTiming,
    assign_to_spans,
    clip_long_words,
    split_spans,
    word_timings,
)
from engine.core.quality import QualityThresholds
from engine.types import SAMPLE_RATE

TS = 1000  # timestamp_begin in these synthetic token streams
EOT = 900


def attempt(text: str, **kw: object) -> Attempt:
    values: dict[str, object] = dict(tokens=(), text=text, avg_logprob=-0.3, no_speech_prob=0.05,
                                     compression_ratio=1.2, temperature=0.0, truncated=False,
                                     last_timestamp_s=None)
    values.update(kw)
    return Attempt(**values)  # type: ignore[arg-type]


def speech(seconds: float) -> np.ndarray:
    rng = np.random.default_rng(1)
    return (0.1 * rng.standard_normal(int(seconds * SAMPLE_RATE))).astype(np.float32)


@pytest.mark.parametrize(("words", "expected"), [
    ("Go forward 10 meters . Go forward 10 meters . Go", 5),
    ("1 2 3 1 2 3 1 2 3 1", 3),
    ("Lord , but I am glad . Lord , but I", 7),
    ("hello there hello there hello", 2),
    ("this is all fine and dandy", None),
    ("yes yes yes yes", None),  # a one-word unit is left to the repeats check
])
def test_restart_index(words, expected):
    assert restart_index(words.split()) == expected


@pytest.mark.parametrize("words, expected", [
    # Loops tiny.en read in partials of the long reading: kept up to the first repeat.
    ("1455 has never been surpassed, printing then, printing then, printing then, then, then", 7),
    ("that as an example of fine typography, that as an example of fine typography,", 7),
    ("the earliest book printed with movable types, the Guttenburg, the earliest book", 9),
    ("Printing Printing Printing Printing", 1),
    ("Go forward ten meters. Go forward ten meters. Go", 4),  # starts over (restart_index)
    # Said twice by people: a run of one or two words needs a third copy.
    ("we said that that was fine", None),
    ("yes yes, I know", None),
    ("no no no no", 1),
])
def test_repeat_index(words, expected):
    assert repeat_index(words.split()) == expected


def test_token_budget_grows_with_duration_and_has_a_floor():
    assert token_budget(0.1) == 16
    assert token_budget(3.0) < token_budget(10.0) <= 224


def test_silence_rules():
    assert is_silence(attempt(""))
    assert is_silence(attempt("Thank you.", no_speech_prob=0.7, avg_logprob=-1.2))
    assert is_silence(attempt("You", no_speech_prob=0.94, avg_logprob=-0.94))  # Whisper keeps it
    assert not is_silence(attempt("Yes.", no_speech_prob=0.7, avg_logprob=-0.2))
    assert not is_silence(attempt("Hello there."))


def test_padded_retry_rule():
    th = QualityThresholds()
    assert not padded_needs_retry(attempt("fine text"), th)
    assert padded_needs_retry(attempt("x", compression_ratio=2.6), th)
    assert padded_needs_retry(attempt("text", avg_logprob=-1.3), th)
    assert padded_needs_retry(attempt("go on " * 6), th)
    assert not padded_needs_retry(attempt("", avg_logprob=-3.0), th)  # silence: no retry


def test_short_failure_reasons():
    th = QualityThresholds()
    audio = speech(3.0)
    assert short_failure(attempt("go forward ten meters"), audio, th) is None
    assert short_failure(attempt("go forward", truncated=True), audio, th) == "truncated"
    assert short_failure(attempt("word " * 40), audio, th) in ("compression", "wpm_high")
    again = attempt("You know Montreal forced liner. You know Montreal forced liner.")
    assert short_failure(again, audio, th) == "restart"
    late = attempt("go forward ten meters", last_timestamp_s=5.0)
    assert short_failure(late, audio, th) is None  # timestamp cues are opt-in
    assert short_failure(late, audio, th, timestamp_cues=True) == "past_end"
    early = attempt("go forward ten meters", last_timestamp_s=1.0)
    assert short_failure(early, audio, th, timestamp_cues=True) == "early_end"
    quiet_tail = np.concatenate([speech(1.0), np.zeros(2 * SAMPLE_RATE, np.float32)])
    assert short_failure(early, quiet_tail, th, timestamp_cues=True) is None


def test_split_spans_follows_timestamp_pairs_and_keeps_an_unfinished_tail():
    tokens = [TS + 0, 1, 2, TS + 50, TS + 60, 3, 4, TS + 100, TS + 110, 5]
    spans = split_spans(tokens, TS, EOT, duration_s=3.0)
    assert spans == [TokenSpan(0.0, 1.0, (1, 2)), TokenSpan(1.2, 2.0, (3, 4)),
                     TokenSpan(2.2, 3.0, (5,))]
    # A single timestamp ending; no timestamps at all.
    assert split_spans([TS, 1, 2, TS + 40], TS, EOT, 2.0) == [TokenSpan(0.0, 0.8, (1, 2))]
    assert split_spans([1, 2], TS, EOT, 2.0) == [TokenSpan(0.0, 2.0, (1, 2))]
    # Timestamps past the audio are clamped to it.
    assert split_spans([TS, 1, TS + 400], TS, EOT, 2.0) == [TokenSpan(0.0, 2.0, (1,))]
    assert split_spans([TS, TS + 10], TS, EOT, 2.0) == []


def test_word_timings_from_an_alignment_path():
    words = [" a", " b", ""]
    word_tokens = [[1], [2], [EOT]]
    # text index, time index (50 per second): a at 0.0-0.2, b at 0.2-0.5, EOT at 0.5
    text_idx = [0, 0, 1, 1, 2]
    time_idx = [0, 5, 10, 20, 25]
    out = word_timings(words, word_tokens, text_idx, time_idx, [0.9, 0.8, 0.7])
    assert [(w.text, w.start_s, w.end_s) for w in out] == [(" a", 0.0, 0.2), (" b", 0.2, 0.5)]
    assert word_timings([""], [[EOT]], [0], [0], [1.0]) == []


def test_long_words_are_clipped_and_words_assigned_to_spans():
    timings = [WordTiming(" hi", 0.0, 3.0, 0.9, 1), WordTiming(" there", 3.0, 3.3, 0.9, 1),
               WordTiming(".", 3.3, 3.4, 0.9, 1), WordTiming(" Now", 3.4, 6.0, 0.9, 1),
               WordTiming(" go", 6.0, 6.3, 0.9, 1)]
    clipped = clip_long_words(timings)
    assert clipped[0].start_s == pytest.approx(2.4)  # 2 x median (0.3)
    assert clipped[3].end_s == 6.0 and clipped[3].start_s == pytest.approx(5.4)
    spans = [TokenSpan(0, 3.4, (1, 2, 3)), TokenSpan(3.4, 6.3, (4, 5))]
    assert [[w.text for w in ws] for ws in assign_to_spans(clipped, spans)] == [
        [" hi", " there", "."], [" Now", " go"]]


def test_equalize_prompts_aligns_the_start_of_transcript():
    sot_prev, sot, pad = 50, 60, 7
    prompts = [[sot_prev, 1, 2, 3, sot], [sot_prev, 4, sot], [sot_prev, 5, 6, sot]]
    out = equalize_prompts(prompts, pad)
    assert {p.index(sot) for p in out} == {4}
    assert out[1] == [sot_prev, pad, pad, 4, sot]
    assert equalize_prompts([[sot], [sot]], pad) == [[sot], [sot]]
