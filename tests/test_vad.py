"""Silero VAD v6 (real ONNX model) on real speech, silence and noise; streaming equals batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.audio.decode import load_audio
from engine.errors import EngineError
from engine.vad import WINDOW, SileroVad


@pytest.fixture(scope="module")
def vad() -> SileroVad:
    model = SileroVad()
    model.load()
    return model


def test_speech_is_detected_in_real_speech(vad: SileroVad, jfk_wav: Path) -> None:
    vad.reset()
    probs = vad.probabilities(load_audio(jfk_wav))
    assert len(probs) == len(load_audio(jfk_wav)) // WINDOW
    assert (probs > 0.5).mean() > 0.4  # most of the excerpt is speech
    assert probs.max() > 0.9


def test_silence_and_noise_are_not_speech(vad: SileroVad) -> None:
    vad.reset()
    assert vad.probabilities(np.zeros(16000 * 5, dtype=np.float32)).max() < 0.1
    vad.reset()
    noise = np.random.default_rng(1).normal(0, 0.05, 16000 * 10).astype(np.float32)
    assert vad.probabilities(noise).max() < 0.5


@pytest.mark.parametrize(("name", "block"), [
    ("arctic-aew-a0001.wav", 700),
    ("mfa-acoustic-corpus.wav", 1300),  # 25 s: the fresh state is rebuilt three times
])
def test_streaming_in_odd_blocks_matches_one_call(vad: SileroVad, shared_audio: Path, name: str,
                                                  block: int) -> None:
    audio = load_audio(shared_audio / name)
    vad.reset()
    whole = vad.probabilities(audio)
    vad.reset()
    pieces: list[float] = []
    for i in range(0, len(audio), block):
        pieces += [p for _, p in vad.feed(audio[i:i + block])]
    assert np.allclose(whole, np.array(pieces), atol=1e-5)


def test_a_new_voice_after_a_minute_of_another_is_still_speech(shared_audio: Path) -> None:
    reading = load_audio(shared_audio / "long-ljspeech-LJ001-0001-0032.wav")[:60 * 16000]
    cold = load_audio(shared_audio / "mfa-cold-corpus.wav")
    gap = np.zeros(16000, dtype=np.float32)
    audio = np.concatenate([reading, gap, cold, gap])
    start = len(reading) + len(gap)
    span = slice(start // WINDOW, (start + len(cold)) // WINDOW)
    scores = {}
    for refresh in (0.0, 8.0):
        model = SileroVad(refresh_s=refresh)
        model.load()
        scores[refresh] = model.probabilities(audio)
    assert np.mean(scores[0.0][span] > 0.5) < 0.1  # one continuous state drifts off this voice
    assert np.mean(scores[8.0][span] > 0.5) > 0.4
    # The continuous state still votes: no window scores lower than with it alone.
    assert np.all(scores[8.0] >= scores[0.0] - 1e-6)
    alone = SileroVad()
    alone.load()
    assert np.mean(alone.probabilities(np.concatenate([gap, cold])) > 0.5) > 0.55
    with pytest.raises(ValueError):
        SileroVad(refresh_s=-1)


def test_feed_returns_the_windows_it_scored(vad: SileroVad) -> None:
    vad.reset()
    audio = np.arange(WINDOW * 2 + 10, dtype=np.float32) / 1e4
    out = vad.feed(audio)
    assert len(out) == 2 and np.array_equal(out[1][0], audio[WINDOW:2 * WINDOW])
    assert vad.feed(np.zeros(WINDOW - 10, dtype=np.float32))[0][0][:10].tolist() == \
        audio[2 * WINDOW:].tolist()


def test_use_before_load_and_bad_model_path(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="load"):
        SileroVad().feed(np.zeros(WINDOW, dtype=np.float32))
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(EngineError, match="VAD model"):
        SileroVad(bad).load()
