"""Choosing the microphone by name, on the real sound server: two virtual microphones (null
sinks, each with a named source), the Settings > Microphone page with its live level meter and
3 s test, `sottovoce listen --device NAME`, and a microphone unplugged in the middle of a
dictation: the default takes over, the user is told, and the words heard before and after the
switch are all in the final text (the real live engine and tiny.en).

Marked e2e through the ``two_mics`` fixture; skipped with the reason where no sound server runs.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from support.pulse import Mics, play

from engine.audio.devices import find_input, list_inputs
from engine.audio.sources import MicrophoneSource


def record_while_playing(source: MicrophoneSource, sink: str, wav: Path) -> np.ndarray:
    player = play(sink, wav)
    chunks = []
    deadline, give_up = None, time.monotonic() + 60
    while deadline is None or time.monotonic() < deadline:
        block = source.read(0.2)
        if block is not None:
            chunks.append(block)
        if deadline is None and player.poll() is not None:
            deadline = time.monotonic() + 0.7
        assert time.monotonic() < give_up
    return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)


def rms(audio: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(audio)))) if len(audio) else 0.0


def test_microphones_are_listed_and_opened_by_name(two_mics: Mics, jfk_wav: Path) -> None:
    names = [d.name for d in list_inputs()]
    assert two_mics.first.name in names and two_mics.second.name in names
    assert not any(n.startswith("Monitor of") for n in names)  # outputs are not microphones
    assert list_inputs()[0].name == two_mics.default.name and list_inputs()[0].is_default
    assert find_input(two_mics.second.name.lower()[:-2]) is not None  # a fragment will do
    # What is played to the second microphone is heard from it, and not from the first.
    heard = {}
    for mic in (two_mics.first, two_mics.second):
        source = MicrophoneSource(mic.name)
        source.start()
        assert source.device_name == mic.name
        heard[mic.name] = rms(record_while_playing(source, two_mics.second.sink, jfk_wav))
        source.stop()
    assert heard[two_mics.second.name] > 0.01 > heard[two_mics.first.name]


def test_a_missing_microphone_is_an_error_or_the_default(two_mics: Mics) -> None:
    from engine.errors import AudioDeviceError

    with pytest.raises(AudioDeviceError, match="'Headset 3000' is not connected; available:"):
        MicrophoneSource("Headset 3000").start()
    source = MicrophoneSource("Headset 3000", fallback=True)
    source.start()
    try:
        assert source.device_name == two_mics.default.name
        assert "recording from the system default" in (source.take_notice() or "")
    finally:
        source.stop()


def test_listen_accepts_a_device_name(two_mics: Mics, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    code = main(["listen", "--device", "No Such Microphone", "--no-journal"])
    err = capsys.readouterr().err
    assert code == 1 and "'No Such Microphone' is not connected" in err
    assert two_mics.second.name in err  # the names to choose from


def test_unplugged_microphone_falls_back_to_the_default_mid_dictation(
        two_mics: Mics, shared_audio: Path, manifest, tiny_transcriber) -> None:  # type: ignore[no-untyped-def]
    """Push-to-talk on the second microphone; it is unplugged after the first sentence; the
    second sentence is spoken into the default one. The finals hold both sentences in order
    (WER), the first one's words at their start (nothing heard before the switch is lost)."""
    from bench.evaluation import error_rate, normalize
    from engine.events import EngineFailed, FinalText
    from engine.live import LiveOptions, LocalLiveEngine

    first, second = "ls-tc-6930-75918-0000.wav", "jfk-inaugural-1961-excerpt.wav"
    texts = {e.path.name: e.text for e in manifest}
    events: list[object] = []
    source = MicrophoneSource(two_mics.second.name, fallback=True)
    engine = LocalLiveEngine(events.append, source=source, runner=tiny_transcriber,
                             options=LiveOptions(mode="ptt", journal=False))
    engine.start()
    deadline = time.monotonic() + 120
    while not any(getattr(e, "state", "") == "listening" for e in events):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(1.0)  # the sound server's stream starts delivering
    engine.begin_utterance()
    assert play(two_mics.second.sink, shared_audio / first).wait(timeout=60) == 0
    time.sleep(0.5)
    two_mics.second.unplug()
    while not any(isinstance(e, EngineFailed) for e in events):
        assert time.monotonic() < deadline, "no fallback notice"
        time.sleep(0.05)
    notice = next(e for e in events if isinstance(e, EngineFailed))
    assert notice.recoverable and "system default" in notice.message
    assert "Nothing already heard is lost" in notice.message
    time.sleep(1.0)
    assert play(two_mics.default.sink, shared_audio / second).wait(timeout=60) == 0
    time.sleep(0.7)
    engine.end_utterance()
    engine.stop()
    assert engine.wait(timeout=120)
    finals = [e for e in events if isinstance(e, FinalText) and e.text]
    # The switch ends nothing: the words come in the order spoken, without overlap. (They may
    # be final in pieces, as many as the machine's speed makes: PolicyOptions.commit_stable;
    # and a hold longer than SegmenterOptions.max_ms, which a slow fallback on a loaded
    # machine makes, is split at its quietest point like any other.)
    assert finals, events
    assert all(a.end <= b.start for a, b in zip(finals, finals[1:], strict=False)), finals
    text = " ".join(f.text for f in finals)
    reference = f"{texts[first]} {texts[second]}"
    assert error_rate([reference], [text]) <= 0.35, text
    # The words heard before the switch are kept: the utterance begins with the first sentence.
    before = len(normalize(texts[first]).split())
    opening = " ".join(normalize(text).split()[:before])
    assert error_rate([texts[first]], [opening]) <= 0.35, text
    assert not [e for e in events if isinstance(e, EngineFailed) and not e.recoverable]
