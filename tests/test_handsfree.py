"""Hands-free auto-stop (app.handsfree.AutoStop): simulated readings, ten a second."""

from __future__ import annotations

from app.handsfree import FIRST_WORD_GRACE_S, AutoStop

ROOM, SPEECH = -62.0, -24.0


def feed(auto: AutoStop, levels: list[float], t0: float) -> float | None:
    """Feed readings 0.1 s apart from t0; the time auto-stop fired, or None."""
    for i, db in enumerate(levels):
        now = t0 + i / 10
        if auto.level(db, now):
            return round(now - t0, 2)
    return None


def test_stops_after_the_silence_that_follows_speech() -> None:
    auto = AutoStop(after_s=2.0)
    assert feed(auto, [ROOM] * 30, -3.0) is None  # not recording: only the floor is learned
    auto.start(0.0)
    levels = [ROOM] * 5 + [SPEECH] * 20 + [ROOM] * 8 + [SPEECH] * 10 + [ROOM] * 40
    # the last speech reading is at 4.2 s; it stops 2 s after it.
    assert feed(auto, levels, 0.0) == 6.2
    assert auto.heard_speech and not auto.running
    assert feed(auto, [ROOM] * 40, 10.0) is None  # fires once


def test_pauses_shorter_than_the_limit_do_not_stop() -> None:
    auto = AutoStop(after_s=2.0)
    feed(auto, [ROOM] * 10, 0.0)
    auto.start(1.0)
    talk = ([SPEECH] * 10 + [ROOM] * 15) * 4  # 1.5 s pauses
    assert feed(auto, talk, 1.0) is None and auto.running


def test_no_speech_stops_after_the_limit_plus_the_grace() -> None:
    auto = AutoStop(after_s=2.0)
    feed(auto, [ROOM] * 10, 0.0)
    auto.start(1.0)
    assert feed(auto, [ROOM] * 60, 1.0) == 2.0 + FIRST_WORD_GRACE_S
    assert not auto.heard_speech


def test_zero_means_never() -> None:
    auto = AutoStop(after_s=0.0)
    auto.start(0.0)
    assert not auto.running and feed(auto, [ROOM] * 200, 0.0) is None


def test_a_louder_room_is_followed_and_a_muted_cue_is_ignored() -> None:
    auto = AutoStop(after_s=2.0)
    feed(auto, [-62.0] * 10 + [-100.0] * 5, 0.0)  # digital silence (a muted cue): not the room
    assert auto.floor_db == -62.0
    feed(auto, [-45.0] * 400, 2.0)  # the fan came on: the floor rises to it
    assert auto.floor_db == -45.0
    auto.start(50.0)
    assert feed(auto, [-45.0] * 60, 50.0) == 2.0 + FIRST_WORD_GRACE_S  # the fan is not speech


def test_speech_right_at_the_start_is_speech_without_a_known_floor() -> None:
    auto = AutoStop(after_s=1.0)
    auto.start(0.0)
    assert feed(auto, [SPEECH] * 50, 0.0) is None and auto.heard_speech


def test_a_loud_reading_of_audio_from_before_the_press_is_not_speech() -> None:
    """The previous recording's stop cue, read before the press but delivered after it (levels
    arrive after their audio), must not make a silent recording wait as if it heard speech."""
    auto = AutoStop(after_s=2.0)
    feed(auto, [ROOM] * 10, 0.0)
    auto.start(1.0)
    auto.since = 16_000  # the press applied at stream position 1 s
    assert not auto.level(SPEECH, 1.05, end=15_000)  # the stop cue, from before the press
    assert not auto.heard_speech
    stopped = feed(auto, [ROOM] * 60, 1.1)
    assert stopped is not None and round(1.1 + stopped, 2) == 1.0 + 2.0 + FIRST_WORD_GRACE_S
    auto.start(10.0)
    auto.since = 160_000
    assert not auto.level(SPEECH, 10.1, end=161_600)  # after the press: speech
    assert auto.heard_speech
