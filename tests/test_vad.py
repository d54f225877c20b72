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


def test_streaming_in_odd_blocks_matches_one_call(vad: SileroVad, shared_audio: Path) -> None:
    audio = load_audio(shared_audio / "arctic-aew-a0001.wav")
    vad.reset()
    whole = vad.probabilities(audio)
    vad.reset()
    pieces: list[float] = []
    for i in range(0, len(audio), 700):
        pieces += [p for _, p in vad.feed(audio[i:i + 700])]
    assert np.allclose(whole, np.array(pieces), atol=1e-5)


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
