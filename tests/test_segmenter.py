"""SpeechSegmenter: hysteresis, pre-roll, min silence, end padding, 30 s split, ptt, flush."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.segmenter import (
    SegmentAudio,
    SegmentEnded,
    SegmenterOptions,
    SegmentEvent,
    SegmentStarted,
    SpeechSegmenter,
)
from engine.types import VAD_WINDOW as WINDOW

MS_PER_WINDOW = WINDOW * 1000 / 16000  # 32 ms


def window(level: float = 0.0) -> np.ndarray:
    return np.full(WINDOW, level, dtype=np.float32)


def feed(seg: SpeechSegmenter, probs: list[float], level: float | None = None) -> list[SegmentEvent]:
    events: list[SegmentEvent] = []
    for p in probs:
        events.extend(seg.push(window(p if level is None else level), p))
    return events


def of(kind: type, events: list[SegmentEvent]) -> list:
    return [e for e in events if isinstance(e, kind)]


def test_speech_starts_after_start_windows_with_preroll() -> None:
    seg = SpeechSegmenter(SegmenterOptions(preroll_ms=320, start_windows=3))
    events = feed(seg, [0.0] * 30 + [0.9, 0.9])
    assert events == [] and not seg.active
    events = feed(seg, [0.9])
    started = of(SegmentStarted, events)
    assert len(started) == 1 and seg.active
    # 10 pre-roll windows (320 ms) + the 3 trigger windows
    assert started[0].start == (30 - 10) * WINDOW
    assert len(started[0].audio) == 13 * WINDOW


def test_preroll_is_at_least_300ms_and_clipped_at_stream_start() -> None:
    with pytest.raises(ValueError):
        SegmenterOptions(preroll_ms=200)
    seg = SpeechSegmenter()
    started = of(SegmentStarted, feed(seg, [0.9, 0.9, 0.9]))
    assert started[0].start == 0 and len(started[0].audio) == 3 * WINDOW


def test_a_click_is_not_speech() -> None:
    seg = SpeechSegmenter()
    assert feed(seg, [0.0, 0.9, 0.9, 0.1, 0.9, 0.0]) == []


def test_hysteresis_keeps_soft_endings_and_ends_after_min_silence() -> None:
    # short_ms=0: every utterance ends after min_silence_ms (short ones are tested below)
    opts = SegmenterOptions(min_silence_ms=320, end_pad_ms=64, short_ms=0)  # 10 + 2 windows
    seg = SpeechSegmenter(opts)
    feed(seg, [0.9] * 10)
    # 0.4 is below start but above end threshold: still speech
    events = feed(seg, [0.4] * 20)
    assert of(SegmentEnded, events) == [] and seg.active
    before = seg.position
    events = feed(seg, [0.1] * 9)
    assert of(SegmentEnded, events) == []
    events = feed(seg, [0.1])
    ended = of(SegmentEnded, events)
    assert len(ended) == 1 and not seg.active
    assert ended[0].speech_end == before
    assert ended[0].end == before + 2 * WINDOW
    assert ended[0].speech_windows == 30
    assert len(of(SegmentAudio, events)) == 1
    assert not of(SegmentAudio, events)[0].speech


def test_end_pad_never_goes_past_the_audio() -> None:
    seg = SpeechSegmenter(SegmenterOptions(min_silence_ms=0, end_pad_ms=1000, short_ms=0))
    feed(seg, [0.9] * 3)
    ended = of(SegmentEnded, feed(seg, [0.0]))
    assert ended[0].end == seg.position


def test_next_preroll_never_reaches_into_the_previous_utterance() -> None:
    opts = SegmenterOptions(min_silence_ms=64, end_pad_ms=32, preroll_ms=640, start_windows=1,
                            short_ms=0)
    seg = SpeechSegmenter(opts)
    feed(seg, [0.9] * 5)
    first_end = of(SegmentEnded, feed(seg, [0.0, 0.0]))[0].end
    started = of(SegmentStarted, feed(seg, [0.9]))[0]
    assert started.start == first_end
    assert started.start + len(started.audio) == seg.position


def test_max_length_splits_at_the_quietest_window_in_the_second_half() -> None:
    opts = SegmenterOptions(max_ms=2048)  # 64 windows
    seg = SpeechSegmenter(opts)
    events = feed(seg, [0.9] * 3, level=0.5)
    start = of(SegmentStarted, events)[0].start
    events = []
    for i in range(61):
        level = 0.01 if i == 45 else 0.5  # window index 48 of the utterance is the quietest
        events += seg.push(window(level), 0.9)
    ended, started = of(SegmentEnded, events), of(SegmentStarted, events)
    assert len(ended) == 1 and len(started) == 1
    assert ended[0].end == start + 48 * WINDOW == started[0].start
    assert len(started[0].audio) == 16 * WINDOW  # windows 48..63 carry over
    assert seg.active
    # a quiet window in the first half is not chosen
    seg2 = SpeechSegmenter(opts)
    feed(seg2, [0.9] * 3, level=0.5)
    events = []
    for i in range(61):
        events += seg2.push(window(0.0 if i == 5 else 0.5 - i * 0.001), 0.9)
    assert of(SegmentEnded, events)[0].end == 63 * WINDOW


def test_flush_closes_the_utterance_in_flight() -> None:
    seg = SpeechSegmenter()
    assert seg.flush() == []
    feed(seg, [0.9] * 5)
    ended = seg.flush()
    assert len(ended) == 1 and isinstance(ended[0], SegmentEnded)
    assert ended[0].end == seg.position and ended[0].speech_end == seg.position
    assert not seg.active and seg.flush() == []


def test_ptt_ignores_vad_for_start_and_end_and_keeps_preroll() -> None:
    seg = SpeechSegmenter(SegmenterOptions(mode="ptt", min_silence_ms=0))
    assert feed(seg, [0.9] * 20) == []  # speech before the press starts nothing
    assert seg.end() == []
    started = seg.begin()
    assert isinstance(started[0], SegmentStarted) and not started[0].speech
    assert started[0].start == 20 * WINDOW - len(started[0].audio)
    assert len(started[0].audio) == 16 * WINDOW  # the whole ring: pre-roll + start windows
    assert seg.begin() == []
    events = feed(seg, [0.0] * 40)  # silence does not end a ptt utterance
    assert of(SegmentEnded, events) == []
    feed(seg, [0.9] * 2 + [0.0] * 3)
    ended = seg.end()
    assert isinstance(ended[0], SegmentEnded)
    assert ended[0].end == seg.position
    assert ended[0].speech_end == seg.position - 3 * WINDOW
    assert ended[0].speech_windows == 2


def test_ptt_press_over_silence_counts_no_speech() -> None:
    seg = SpeechSegmenter(SegmenterOptions(mode="ptt"))
    seg.begin()
    feed(seg, [0.0] * 10)
    ended = seg.end()[0]
    assert isinstance(ended, SegmentEnded)
    assert ended.speech_windows == 0 and ended.speech_end == ended.end


def test_begin_on_an_empty_stream() -> None:
    seg = SpeechSegmenter(SegmenterOptions(mode="ptt"))
    started = seg.begin()[0]
    assert isinstance(started, SegmentStarted)
    assert started.start == 0 and len(started.audio) == 0


def test_rejects_wrong_window_size() -> None:
    with pytest.raises(ValueError):
        SpeechSegmenter().push(np.zeros(100, dtype=np.float32), 0.5)


@pytest.mark.parametrize("kwargs", [
    {"mode": "always"}, {"start_threshold": 0.3, "end_threshold": 0.5}, {"start_windows": 0},
    {"min_silence_ms": -1}, {"end_pad_ms": -1}, {"max_ms": 1000}, {"end_threshold": 0.0},
    {"ptt_threshold": 0.0}, {"short_ms": -1}, {"short_silence_ms": -1}, {"soft_threshold": 0.0},
    {"soft_threshold": 0.4}, {"soft_snr_db": -1}, {"soft_windows": 0}, {"noise_floor_ms": 10},
])
def test_options_are_validated(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        SegmenterOptions(**kwargs)


def test_windows_rounds_up() -> None:
    assert SegmenterOptions().windows(33) == 2
    assert SegmenterOptions().windows(32) == 1
    assert MS_PER_WINDOW == 32


def test_a_soft_voice_starts_speech_when_its_run_peaks_above_the_start_threshold() -> None:
    seg = SpeechSegmenter(SegmenterOptions(preroll_ms=320))
    assert feed(seg, [0.0] * 20 + [0.4] * 6) == []  # soft but never confidently speech
    started = of(SegmentStarted, feed(seg, [0.55]))
    assert len(started) == 1
    # the whole soft run (7 windows) is kept, plus 10 pre-roll windows before it
    assert started[0].start == (20 - 10) * WINDOW
    seg2 = SpeechSegmenter()
    assert feed(seg2, [0.4, 0.6, 0.2, 0.4, 0.4]) == []  # the peak's run was broken


def test_a_very_long_soft_onset_keeps_what_the_ring_holds() -> None:
    seg = SpeechSegmenter(SegmenterOptions(preroll_ms=320))
    started = of(SegmentStarted, feed(seg, [0.4] * 100 + [0.9]))[0]
    assert len(started.audio) == (10 + 3 + 32) * WINDOW


def test_ptt_counts_soft_voices_as_speech() -> None:
    seg = SpeechSegmenter(SegmenterOptions(mode="ptt"))
    seg.begin()
    events = feed(seg, [0.2, 0.1])
    assert [e.speech for e in of(SegmentAudio, events)] == [True, False]
    ended = seg.end()[0]
    assert isinstance(ended, SegmentEnded) and ended.speech_windows == 1


def soft_feed(seg: SpeechSegmenter, steps: list[tuple[float, float]]) -> list[SegmentEvent]:
    """Feed (level, probability) pairs: the soft path looks at both."""
    events: list[SegmentEvent] = []
    for level, p in steps:
        events.extend(seg.push(window(level), p))
    return events


QUIET = (0.0001, 0.0)  # -80 dBFS room tone
FALSETTO = (0.05, 0.05)  # -26 dBFS, Silero unsure: mfa-falsetto2 scores 0.02-0.26


def test_a_loud_voice_silero_scores_low_starts_a_soft_utterance() -> None:
    seg = SpeechSegmenter(SegmenterOptions(preroll_ms=320))
    assert soft_feed(seg, [QUIET] * 20 + [FALSETTO] * 7 + [(0.05, 0.2)]) != []
    assert seg.active
    events = soft_feed(seg, [FALSETTO] * 20)  # carried by its energy, not its VAD score
    assert of(SegmentEnded, events) == []
    assert all(e.speech for e in of(SegmentAudio, events))
    ended = of(SegmentEnded, soft_feed(seg, [QUIET] * 40))
    assert len(ended) == 1 and ended[0].soft and ended[0].speech_windows == 28


def test_the_soft_path_keeps_the_lead_of_a_silero_start() -> None:
    seg = SpeechSegmenter(SegmenterOptions(preroll_ms=320, start_windows=3))
    started = of(SegmentStarted, soft_feed(seg, [QUIET] * 40 + [FALSETTO] * 15 + [(0.05, 0.2)]))
    assert len(started) == 1
    assert len(started[0].audio) == (10 + 3) * WINDOW  # pre-roll + start windows, not the run


def test_the_soft_path_needs_a_vad_hint_a_long_run_and_a_rise_above_the_floor() -> None:
    # loud but Silero never above soft_threshold (a fan switched on, music)
    assert soft_feed(SpeechSegmenter(), [QUIET] * 20 + [FALSETTO] * 60) == []
    # a click: loud and scored, but shorter than soft_windows
    assert soft_feed(SpeechSegmenter(), [QUIET] * 20 + [(0.3, 0.3)] * 7 + [QUIET] * 20) == []
    # steady noise as loud as the voice: it is its own floor
    assert soft_feed(SpeechSegmenter(), [(0.05, 0.2)] * 200) == []
    # turned off
    off = SpeechSegmenter(SegmenterOptions(soft_snr_db=0))
    assert soft_feed(off, [QUIET] * 20 + [(0.05, 0.2)] * 40) == []


def test_a_silero_start_is_not_soft_and_not_carried_by_energy() -> None:
    seg = SpeechSegmenter(SegmenterOptions(min_silence_ms=320))
    soft_feed(seg, [QUIET] * 20 + [(0.05, 0.9)] * 50)  # 1.6 s of speech: not a short one
    events = soft_feed(seg, [FALSETTO] * 10)  # loud, but Silero says no: silence
    ended = of(SegmentEnded, events)
    assert len(ended) == 1 and not ended[0].soft


def test_a_split_soft_utterance_stays_soft() -> None:
    seg = SpeechSegmenter(SegmenterOptions(max_ms=2048))
    soft_feed(seg, [QUIET] * 20 + [FALSETTO] * 7 + [(0.05, 0.2)])
    events = soft_feed(seg, [FALSETTO] * 70)
    assert len(of(SegmentStarted, events)) == 1 and seg.active
    assert of(SegmentEnded, events)[0].soft
    assert of(SegmentEnded, seg.flush())[0].soft


def test_short_utterances_wait_longer_for_the_next_word() -> None:
    opts = SegmenterOptions(min_silence_ms=320, short_ms=1000, short_silence_ms=640)
    seg = SpeechSegmenter(opts)
    feed(seg, [0.9] * 10)  # 320 ms: a lone word
    assert of(SegmentEnded, feed(seg, [0.0] * 19)) == []  # 608 ms of silence: still waiting
    feed(seg, [0.9] * 25)  # the next word arrives: one utterance, now 1.7 s long
    assert of(SegmentEnded, feed(seg, [0.0] * 9)) == []
    ended = of(SegmentEnded, feed(seg, [0.0]))  # 320 ms end it now
    assert len(ended) == 1 and ended[0].speech_windows == 35


def test_a_soft_utterance_silero_becomes_sure_of_is_not_doubted() -> None:
    seg = SpeechSegmenter(SegmenterOptions(min_silence_ms=320, short_ms=0))
    soft_feed(seg, [QUIET] * 20 + [FALSETTO] * 7 + [(0.05, 0.2)] + [(0.05, 0.9)] * 5)
    events = soft_feed(seg, [FALSETTO] * 10)  # energy still carries it ...
    assert of(SegmentEnded, events) == []
    ended = of(SegmentEnded, soft_feed(seg, [QUIET] * 10))
    assert len(ended) == 1 and not ended[0].soft  # ... but it is not decoded as doubtful


def test_cut_ends_the_utterance_at_an_earlier_pause_and_the_rest_goes_on() -> None:
    seg = SpeechSegmenter(SegmenterOptions(end_pad_ms=192))  # 6 windows
    start = of(SegmentStarted, feed(seg, [0.9] * 20))[0].start
    pause_at = seg.position + 6 * WINDOW  # where a SegmentPaused said the utterance would end
    feed(seg, [0.0] * 8 + [0.9] * 10)  # a pause under the usual wait, then speech again
    assert seg.active
    speech_end = pause_at - 6 * WINDOW
    events = seg.cut(pause_at, speech_end)
    [ended], [started] = of(SegmentEnded, events), of(SegmentStarted, events)
    assert (ended.end, ended.speech_end) == (pause_at, speech_end)
    assert started.start == pause_at and started.start + len(started.audio) == seg.position
    assert seg.active  # the speech after the pause is the next utterance
    closed = of(SegmentEnded, feed(seg, [0.0] * 30))  # its own silence ends it as usual
    assert closed and closed[0].end == pause_at + 18 * WINDOW
    assert start < pause_at


@pytest.mark.parametrize("where", ["start", "off_window", "past_end", "speech_after"])
def test_cut_outside_the_utterance_in_flight_does_nothing(where: str) -> None:
    seg = SpeechSegmenter()
    start = of(SegmentStarted, feed(seg, [0.9] * 20))[0].start
    end = {"start": start, "off_window": start + 5 * WINDOW + 7,
           "past_end": seg.position + WINDOW, "speech_after": start + 5 * WINDOW}[where]
    speech_end = end + WINDOW if where == "speech_after" else end
    assert seg.cut(end, speech_end) == [] and seg.active
    assert SpeechSegmenter().cut(0, 0) == []  # nothing in flight

