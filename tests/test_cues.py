"""Start/stop cues (engine.audio.cues) and keeping them out of the recording.

Fast lane: the tones themselves, and LocalLiveEngine.mute_input silencing exactly the range it
is given (with the scripted runner recording what it was asked to decode). End to end (marked
e2e via the ``virtual_mic`` fixture): on a real PulseAudio null sink whose monitor is the
microphone, so the cue played on the "speakers" IS heard by the microphone, a dictation of
silence with the cues on gives no words, and no cue sound reaches the audio the engine works on.
Skipped (with the reason) only where no sound server runs; `.ci/desktop.sh` starts one in CI.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from engine.asr.fake import ScriptedRunner
from engine.audio.cues import (
    CUE_MS,
    ECHO_TAIL_S,
    MAX_PEAK,
    MUTE_GUARD_S,
    RATE,
    CuePlayer,
    cue_tone,
)
from engine.audio.decode import load_audio
from engine.audio.sources import FileSource, MicrophoneSource
from engine.core.policy import PolicyOptions
from engine.events import (
    EngineFailed,
    Event,
    FinalText,
    LevelChanged,
    SpeechEnded,
    SpeechStarted,
    StateChanged,
)
from engine.live import LiveOptions, LocalLiveEngine, ReportedCost
from engine.types import SAMPLE_RATE, Audio, DecodeRequest, Transcript


def dominant_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples)), 8 * len(samples)))
    return float(np.fft.rfftfreq(8 * len(samples), 1 / rate)[int(np.argmax(spectrum))])


def test_cues_are_short_soft_tones_with_fades() -> None:
    start, stop = cue_tone("start", 100), cue_tone("stop", 100)
    assert start.dtype == np.float32 and len(start) == len(stop) == RATE * CUE_MS // 1000
    assert float(np.abs(start).max()) == pytest.approx(MAX_PEAK, rel=1e-4)
    assert abs(float(start[0])) < 1e-3 and abs(float(start[-1])) < 1e-2  # no click
    third = len(start) // 3
    # "start" rises, "stop" falls (the first and last thirds' main frequency).
    assert dominant_hz(start[:third], RATE) < dominant_hz(start[-third:], RATE)
    assert dominant_hz(stop[:third], RATE) > dominant_hz(stop[-third:], RATE)
    assert 550 < dominant_hz(start[:third], RATE) < 950
    quiet = cue_tone("start", 40)
    assert float(np.abs(quiet).max()) == pytest.approx(MAX_PEAK * 0.16, rel=1e-4)
    assert not np.any(cue_tone("stop", 0))
    with pytest.raises(ValueError, match="cue must be one of start, stop"):
        cue_tone("beep", 50)
    assert CuePlayer().play("start", 0) is None  # nothing to play, no thread


class KeepingRunner(ScriptedRunner):
    """The scripted runner, keeping each decoded request's audio."""

    def __init__(self) -> None:
        super().__init__(("And so my fellow Americans.",))
        self.audio: list[Audio] = []

    def decode_batch(self, requests: Sequence[DecodeRequest]) -> list[Transcript]:
        self.audio.extend(r.audio.copy() for r in requests)
        return super().decode_batch(requests)


def test_mute_input_silences_exactly_the_range_given(jfk_wav: Path) -> None:
    speech = load_audio(jfk_wav)[: 6 * SAMPLE_RATE]
    runner = KeepingRunner()
    events: list[Event] = []
    options = LiveOptions(mode="ptt", journal=False, policy=PolicyOptions(partials=False),
                          decode_cost=ReportedCost())  # (simulated time: the script's cost)
    engine = LocalLiveEngine(events.append, source=FileSource(audio=speech), runner=runner,
                             options=options)
    press, release = SAMPLE_RATE, 5 * SAMPLE_RATE
    mute = (press, press + SAMPLE_RATE // 2)  # 0.5 s after the press
    engine.mute_input((mute[1] - mute[0]) / SAMPLE_RATE, at=mute[0])
    engine.begin_utterance(at=press)
    engine.end_utterance(at=release)
    engine.start()
    assert engine.wait(timeout=60)
    (started,) = [e for e in events if isinstance(e, SpeechStarted)]
    final = runner.audio[-1]  # the final decode: the whole utterance
    start = started.at
    assert start < press  # the pre-roll, before the press, is kept
    kept = speech[start:start + len(final)].copy()
    kept[mute[0] - start:mute[1] - start] = 0.0
    np.testing.assert_array_equal(final, kept)
    assert float(np.abs(speech[mute[0]:mute[1]]).max()) > 0.1  # there was speech to silence
    assert [e.text for e in events if isinstance(e, FinalText)] == ["And so my fellow Americans."]


class TeeMicrophone(MicrophoneSource):
    """The real microphone, keeping a copy of every block (what the mic heard, before muting)."""

    def __init__(self) -> None:
        super().__init__("pulse")
        self.raw: list[Audio] = []

    def read(self, timeout: float | None = None) -> Audio | None:  # type: ignore[override]
        block = super().read(timeout)
        if block is not None:
            self.raw.append(block.copy())
        return block


def _wait_for(events: queue.Queue[Event], kind: type, timeout: float = 60.0) -> Event:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = events.get(timeout=max(0.1, deadline - time.monotonic()))
        assert not isinstance(event, EngineFailed), event
        if isinstance(event, kind):
            return event
    raise AssertionError(f"no {kind.__name__} within {timeout} s")


def _levels_while(events: queue.Queue[Event], going_on: Callable[[list[LevelChanged]], bool],
                  timeout: float = 60.0) -> list[LevelChanged]:
    """The levels that come while ``going_on(levels so far)`` holds: an event (a level, a
    stream position) ends the wait, never a number of seconds; the timeout bounds a hang."""
    levels: list[LevelChanged] = []
    deadline = time.monotonic() + timeout
    while going_on(levels):
        assert time.monotonic() < deadline, "the levels never came"
        try:
            event = events.get(timeout=0.05)
        except queue.Empty:
            continue
        assert not isinstance(event, EngineFailed), event
        if isinstance(event, LevelChanged):
            levels.append(event)
    return levels


def _until_position(end: int) -> Callable[[list[LevelChanged]], bool]:
    """Going on until the levels reach stream position ``end``."""
    return lambda levels: not levels or levels[-1].end < end


def test_cues_are_heard_by_the_microphone_but_never_transcribed(
        virtual_mic: str, monkeypatch: pytest.MonkeyPatch,  # noqa: F811 - the fixture
        tiny_transcriber) -> None:  # type: ignore[no-untyped-def]
    """Cues played into the microphone's own sink: heard loud on the level meter when not
    recording; in a dictation the start cue lands inside the muted range and the stop cue after
    the utterance's end, so what the engine measured stays at the silence floor and the final
    is empty. Every wait is for a level, a stream position or an event, never some seconds."""
    monkeypatch.setenv("PULSE_SINK", virtual_mic)  # the cues play into the microphone's sink
    events: queue.Queue[Event] = queue.Queue()
    source = TeeMicrophone()
    engine = LocalLiveEngine(events.put, source=source, runner=tiny_transcriber,
                             options=LiveOptions(mode="ptt", journal=False,
                                                 level_interval_ms=20))
    player = CuePlayer()
    engine.start()
    try:
        while (event := events.get(timeout=60)) != StateChanged("listening"):
            assert not isinstance(event, EngineFailed), event
        for _ in range(10):  # the microphone delivers (the first blocks may take a while)
            _wait_for(events, LevelChanged, timeout=30)
        # Control: a cue while not recording is heard, loud, on the microphone's level meter:
        # the levels until the tone has come (above -15 dBFS) and gone again (below -40).
        thread = player.play("start", 100)
        assert thread is not None
        heard = _levels_while(events, lambda levels: not any(
            level.peak_db < -40 for level in levels[next(
                (i for i, level in enumerate(levels) if level.peak_db > -15), len(levels)):]))
        cue_db = max(level.peak_db for level in heard)
        assert cue_db > -15.0, cue_db  # the cue peaks at -6 dBFS at full volume
        # A second of stream after it, so the dictation's pre-roll cannot reach back to it.
        last_loud = max(level.end for level in heard if level.peak_db > -15)
        _levels_while(events, _until_position(last_loud + SAMPLE_RATE))

        # A dictation of silence, cues on, as app.dictation does it: mute from the press on,
        # start cue, press; once the tone is out the mute is cut down to what it took.
        took: list[float] = []

        def played(seconds: float) -> None:
            took.append(seconds)
            engine.mute_input(seconds + ECHO_TAIL_S, at=at)

        at = engine.mute_input(MUTE_GUARD_S)
        player.play("start", 100, played)
        engine.begin_utterance(at=at)
        started = _wait_for(events, SpeechStarted)
        # The recording's first 1.5 s from the press, in stream time (the cue is in it).
        during = [level for level in _levels_while(
            events, _until_position(at + round(1.5 * SAMPLE_RATE))) if level.end > at]
        engine.end_utterance()
        ended = _wait_for(events, SpeechEnded)
        player.play("stop", 100)  # what app.dictation does on SpeechEnded
        final = _wait_for(events, FinalText)
        # The stop cue reaches the microphone, whenever it does (the deadline bounds a hang).
        deadline = time.monotonic() + 60
        while not np.any(np.flatnonzero(np.abs(np.concatenate(source.raw)) > 0.05) >= ended.at):
            assert time.monotonic() < deadline, "the stop cue never reached the microphone"
            time.sleep(0.05)
    finally:
        engine.stop()
        assert engine.wait(timeout=60)
    assert isinstance(started, SpeechStarted) and isinstance(ended, SpeechEnded)
    assert isinstance(final, FinalText) and final.text == "" and final.words == ()
    # What the engine measured while recording (after the mute) stays at the silence floor.
    assert during and max(level.peak_db for level in during) < cue_db - 40, (
        [round(level.peak_db) for level in during], cue_db)
    # What the microphone heard: the start cue, inside the muted range, and the stop cue, after
    # the utterance's end; nothing of either inside the audio the engine kept.
    raw = np.concatenate(source.raw)
    loud = np.flatnonzero(np.abs(raw) > 0.05)
    # (Played out, not failed: how long it took is a speed, bench/'s; that the tone fell where
    # the mute was, below, is the property.)
    assert len(took) == 1 and took[0] > 0.0, took
    mute_end = at + round((took[0] + ECHO_TAIL_S) * SAMPLE_RATE)
    in_utterance = loud[(loud >= started.at) & (loud < ended.at)]
    print("cue samples in the utterance:", in_utterance.min() - at if len(in_utterance) else None,
          in_utterance.max() - at if len(in_utterance) else None, "mute", mute_end - at)
    assert len(in_utterance) > 0  # the start cue was heard during the recording...
    assert in_utterance.min() >= at and in_utterance.max() < mute_end  # ...only while muted
    assert np.any(loud >= ended.at)  # the stop cue was heard, after the end
