"""The CTranslate2 chunk decoder on the real tiny.en model and real speech."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.asr.base import DecodeOptions, Transcriber
from engine.asr.ct2_decoder import Ct2WhisperRunner, DecodeRequest, FastChunkTranscriber
from engine.audio.decode import load_audio
from engine.evaluation import error_rate

pytestmark = pytest.mark.model

GREEDY = DecodeOptions(beam_size=1, word_timestamps=False)
SHORT = DecodeOptions(beam_size=1, word_timestamps=False, short_context=True)


@pytest.fixture(scope="module")
def runner(tiny_transcriber) -> Ct2WhisperRunner:  # type: ignore[no-untyped-def]
    return Ct2WhisperRunner(tiny_transcriber.model)


def clip(shared_audio: Path, name: str) -> np.ndarray:
    return load_audio(shared_audio / name)


def test_batch_returns_each_clip_its_own_text_in_order(runner, shared_audio):
    names = ["arctic-aew-a0001.wav", "jfk-inaugural-1961-excerpt.wav",
             "cmusphinx-goforward.wav"]
    requests = [DecodeRequest(clip(shared_audio, n), GREEDY, tag=n) for n in names]
    results = runner.decode_batch(requests)
    assert len(results) == 3
    assert "danger trail" in results[0].text.lower()
    assert "fellow americans" in results[1].text.lower()
    assert "forward" in results[2].text.lower()
    for result in results:
        assert result.extra["path"] == "padded"
        assert result.segments and result.segments[0].avg_logprob < 0


def test_silence_gives_no_text_on_both_paths(runner):
    zeros = np.zeros(3 * 16_000, dtype=np.float32)
    results = runner.decode_batch([DecodeRequest(zeros, GREEDY), DecodeRequest(zeros, SHORT)])
    assert [r.text for r in results] == ["", ""]


def test_fast_chunk_transcriber_is_a_transcriber(tiny_transcriber, shared_audio):
    fast = FastChunkTranscriber(tiny_transcriber)
    assert isinstance(fast, Transcriber)
    fast.load()
    audio = clip(shared_audio, "arctic-aew-a0001.wav")
    result = fast.transcribe(audio, SHORT)
    assert result.extra["path"] in ("short", "padded")
    assert error_rate(["Author of the danger trail, Philip Steels, etc."], [result.text]) < 0.5


def test_request_validation():
    with pytest.raises(ValueError):
        DecodeRequest(np.zeros(31 * 16_000, dtype=np.float32))
    with pytest.raises(ValueError):
        DecodeRequest(np.zeros(10, dtype=np.float64))
