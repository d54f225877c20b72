"""The quality ladder (engine.core.ladder): its checks, every rung, and the live finals' use of it."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.ladder import (
    LIVE,
    LONG_FORM,
    SHORT_PATH,
    Ladder,
    QualityThresholds,
    Rung,
    check,
    is_no_speech,
    is_silent,
    next_rung,
    prompt_echo,
    word_loop,
)
from engine.core.policy import PolicyOptions, StreamingPolicy
from engine.core.segmenter import SegmentEnded, SegmentStarted
from engine.events import FinalText
from engine.types import SAMPLE_RATE, Segment, Transcript, Word

GOOD = "Ask not what your country can do for you."
LOOP = " and so and so and so and so and so and so and so and so and so and so"


@pytest.mark.parametrize(("text", "seconds", "kwargs", "expected"), [
    (GOOD, 3.0, {}, ()),
    ("", 3.0, {"avg_logprob": -3.0}, ()),
    (LOOP, 8.0, {}, ("compression", "repeats")),
    (LOOP, 8.0, {"word_loops": True}, ("compression", "repeats", "word_loop")),
    ("one " * 30, 2.0, {"word_loops": True}, ("compression", "wpm_high", "repeats", "word_loop")),
    ("what are you what are you", 3.0, {}, ()),  # a refrain, unless asked for word loops
    ("what are you what are you", 3.0, {"word_loops": True}, ("word_loop",)),
    (GOOD, 3.0, {"prompt": "well " + GOOD}, ("prompt_echo",)),
    ("Thank you.", 3.0, {"no_speech_prob": 0.7, "avg_logprob": -1.2}, ("no_speech",)),
    ("You", 3.0, {"no_speech_prob": 0.94, "avg_logprob": -0.94}, ("no_speech",)),  # strict rule
    (GOOD, 3.0, {"avg_logprob": -1.2}, ("logprob",)),
    (GOOD, 3.0, {"avg_logprob": -1.2, "greedy": True}, ("logprob", "low_confidence")),
    (GOOD, 3.0, {"avg_logprob": -0.9, "greedy": True}, ("low_confidence",)),
    (GOOD, 3.0, {"avg_logprob": -0.5, "greedy": True, "min_word_prob": 0.1}, ("low_confidence",)),
    (GOOD, 3.0, {"avg_logprob": -0.5, "greedy": True, "min_word_prob": 0.5}, ()),
    (GOOD, 3.0, {"avg_logprob": -0.9}, ()),  # only greedy decodes have a beam rung to take
    (GOOD, 3.0, {"max_speech_prob": 0.1}, ("text_on_silence",)),
])
def test_check_flags(text, seconds, kwargs, expected):
    assert check(text, seconds, **kwargs) == expected


def test_the_low_confidence_thresholds_are_settable():
    off = QualityThresholds(confident_logprob=-99.0, confident_word_prob=0.0)
    assert check(GOOD, 3.0, avg_logprob=-0.9, min_word_prob=0.01, greedy=True,
                 thresholds=off) == ()


def test_loop_helpers():
    assert word_loop("1 1 1 1 1 1", 2.0) == {"word_loop"}
    assert word_loop("words, words, words, words", 4.0) == set()  # spoken slowly: speech
    assert prompt_echo(None, GOOD) == set()


def test_silence_rules():
    assert is_no_speech(0.7, -1.2) and is_no_speech(0.94, -0.94)
    assert not is_no_speech(0.7, -0.2) and not is_no_speech(0.1, -2.0)
    silent = np.zeros(SAMPLE_RATE, np.float32)
    loud = np.full(SAMPLE_RATE, 0.1, np.float32)
    assert is_silent(silent, 0.7) and not is_silent(silent, 0.3) and not is_silent(loud, 0.9)


LOOPING = ("repeats", "word_loop")
SHAKY = ("low_confidence",)
WHISPER_SHAKY = ("logprob", "low_confidence")


@pytest.mark.parametrize(("flags", "tried", "seconds", "greedy", "ladder", "rung"), [
    ((), (), 10, True, LONG_FORM, Rung.ACCEPT),
    # long-form: beam for low confidence, hotter, split, give up
    (SHAKY, (), 10, True, LONG_FORM, Rung.BEAM),
    (SHAKY, (), 10, False, LONG_FORM, Rung.ACCEPT),  # not greedy: confidence alone is advisory
    (SHAKY, (Rung.BEAM,), 10, False, LONG_FORM, Rung.ACCEPT),
    (WHISPER_SHAKY, (Rung.BEAM,), 10, False, LONG_FORM, Rung.HOTTER),
    (LOOPING, (), 10, True, LONG_FORM, Rung.HOTTER),
    (LOOPING, (Rung.HOTTER,), 10, False, LONG_FORM, Rung.SPLIT),
    (LOOPING, (Rung.HOTTER,), 3, False, LONG_FORM, Rung.FLAG),  # too short to split
    (LOOPING, (Rung.HOTTER, Rung.SPLIT), 10, True, LONG_FORM, Rung.FLAG),
    (("text_on_silence",), (Rung.HOTTER, Rung.SPLIT), 10, True, LONG_FORM, Rung.DROP),
    (("no_speech", "text_on_silence"), (Rung.HOTTER,), 3, False, LONG_FORM, Rung.DROP),
    # live finals: one retry, beam for low confidence, else the padded window
    (SHAKY, (), 3, True, LIVE, Rung.BEAM),
    (("word_loop", "low_confidence"), (), 3, True, LIVE, Rung.PADDED),
    (("early_end",), (), 3, False, LIVE, Rung.PADDED),
    (("prompt_echo",), (Rung.PADDED,), 3, False, LIVE, Rung.FLAG),
    (("logprob",), (), 3, False, LIVE, Rung.FLAG),  # a beam final: no rung left for it
    (("wpm_low",), (), 3, True, LIVE, Rung.FLAG),
    # the runner's short window: anything suspect goes to the padded window
    (("logprob",), (), 3, False, SHORT_PATH, Rung.FLAG),
    (("compression",), (), 3, False, SHORT_PATH, Rung.PADDED),
])
def test_next_rung(flags, tried, seconds, greedy, ladder, rung):
    assert next_rung(flags, tried, seconds=seconds, greedy=greedy, ladder=ladder) is rung


def test_a_ladder_offers_only_retries():
    with pytest.raises(ValueError):
        Ladder((Rung.ACCEPT,), max_retries=1)
    assert next_rung(LOOPING, (), seconds=10, greedy=True,
                     ladder=Ladder((), max_retries=0)) is Rung.FLAG


# --- live finals (engine.core.policy) -------------------------------------------------------

def _final(text: str, seconds: float, avg_logprob: float = -0.2) -> Transcript:
    n = int(seconds * SAMPLE_RATE)
    words = tuple(Word(w, i * 1000, i * 1000 + 900, 0.9) for i, w in enumerate(text.split()))
    return Transcript((Segment(text, 0, n, words=words, avg_logprob=avg_logprob),), duration=n)


def _spoken(policy: StreamingPolicy, seconds: float) -> None:
    n = int(seconds * SAMPLE_RATE)
    audio = np.full(n, 0.1, np.float32)
    policy.handle(SegmentStarted(0, audio, speech=True), 0.0)
    # The speech ends with the last scripted word, so no early-end check fires.
    policy.handle(SegmentEnded(n, 1000 * 3 + 900, 10), seconds)


def test_a_greedy_final_of_low_confidence_is_decoded_again_with_beam_on_the_same_window():
    policy = StreamingPolicy(PolicyOptions(language="en"))
    _spoken(policy, 2.0)
    first = policy.next_request(2.0)
    assert first is not None and first.options.beam_size == 1
    assert policy.on_result(first.request_id, _final("go forward ten meters", 2.0, -0.9),
                            2.1)[1:] == []
    retry = policy.next_request(2.1)
    assert retry is not None and retry.options.beam_size == PolicyOptions().careful_beam_size
    assert retry.options.short_context == first.options.short_context
    events = policy.on_result(retry.request_id, _final("go forward ten meters", 2.0, -0.8), 2.3)
    finals = [e for e in events if isinstance(e, FinalText)]
    assert [f.text for f in finals] == ["Go forward ten meters."]
    assert policy.next_request(2.3) is None  # one retry only, and low confidence is advisory


def test_a_confident_greedy_final_is_kept_at_once():
    policy = StreamingPolicy(PolicyOptions(language="en"))
    _spoken(policy, 2.0)
    first = policy.next_request(2.0)
    assert first is not None
    events = policy.on_result(first.request_id, _final("Go forward ten meters.", 2.0, -0.2), 2.1)
    assert [e.text for e in events if isinstance(e, FinalText)] == ["Go forward ten meters."]


def test_noise_decoded_as_a_piece_of_the_style_prompt_counts_as_recited() -> None:
    from engine.core.ladder import prompt_echo
    from engine.core.prompt import STYLE_ANCHORS

    anchor = STYLE_ANCHORS["en"]
    assert "prompt_echo" in check("Okay.", 2.0, prompt=anchor)  # noise -> "Okay."
    assert "prompt_echo" in check("Okay, here it is.", 2.0, prompt=anchor)
    assert "prompt_echo" not in check("Okay, let's go.", 2.0, prompt=anchor)
    # A history prompt: a short sentence said twice is dictation, not an echo.
    assert prompt_echo("Thank you.", "Thank you.") == set()
    assert "prompt_echo" not in check("And so my fellow Americans.", 2.0,
                                      prompt="And so my fellow Americans.")
