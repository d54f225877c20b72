"""Every ASR backend is one `engine.types.Runner`: the two faster-whisper runners on the real
tiny.en and real speech from the test corpus (tests/audio), the scripted fake, and the TensorRT-LLM runner's
clear error where its package is missing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.evaluation import error_rate
from engine.asr import local_runner
from engine.asr.ct2_decoder import Ct2Runner
from engine.asr.fake import ScriptedRunner, silence
from engine.asr.sequential import SequentialRunner
from engine.asr.tensorrt import TensorRTLLMRunner
from engine.audio.decode import load_audio
from engine.errors import DependencyMissingError, EngineError
from engine.types import DecodeOptions, DecodeRequest, Runner

CLIP = "arctic-aew-a0001.wav"
REFERENCE = "Author of the danger trail, Philip Steels, etc."
GREEDY = DecodeOptions(beam_size=1, word_timestamps=True)


def _decode_clip(runner: Runner, shared_audio: Path, options: DecodeOptions) -> None:
    """A Runner on the real model: the clip within 3 words of its 8-word reference (0 to 2
    measured with MKL and AVX2 kernels), its words within the audio, digital silence without
    text."""
    assert isinstance(runner, Runner)
    assert runner.info.name == "tiny.en" and runner.streams == 1 and runner.device == "cpu"
    runner.load()  # idempotent: the model is already loaded
    audio = load_audio(shared_audio / CLIP)
    speech, quiet = runner.decode_batch([DecodeRequest(audio, options),
                                         DecodeRequest(silence(2.0), options)])
    assert error_rate([REFERENCE], [speech.text]) <= 3 / len(REFERENCE.split()), speech.text
    assert speech.duration == len(audio) and speech.words
    assert all(0 <= w.start <= w.end <= len(audio) for w in speech.words)
    assert quiet.text == ""


@pytest.mark.model
def test_ct2_runner_is_a_runner_and_decodes_real_speech(tiny_transcriber, shared_audio):  # type: ignore[no-untyped-def]
    runner = Ct2Runner(tiny_transcriber.model)  # shares the loaded weights
    _decode_clip(runner, shared_audio, DecodeOptions(beam_size=1, short_context=True))
    assert runner.model is tiny_transcriber.model


@pytest.mark.model
def test_sequential_runner_is_a_runner_and_decodes_real_speech(tiny_transcriber, shared_audio):  # type: ignore[no-untyped-def]
    _decode_clip(tiny_transcriber, shared_audio, GREEDY)
    audio = load_audio(shared_audio / CLIP)
    segments, language = tiny_transcriber.iter_segments(audio, GREEDY)
    assert language == "en" and "".join(s.text for s in segments).strip()


def test_local_runner_builds_the_fast_or_the_padded_runner_unloaded() -> None:
    fast = local_runner("tiny.en", device="cpu", streams=2)
    assert isinstance(fast, Ct2Runner) and fast.streams == 2 and fast.device == "cpu"
    padded = local_runner("tiny.en", fast=False, device="cpu")
    assert isinstance(padded, SequentialRunner) and padded.streams == 1
    with pytest.raises(EngineError, match="not loaded"):
        fast.decode_batch([DecodeRequest(silence(1.0))])


def test_scripted_runner_is_a_runner_and_keeps_its_script() -> None:
    fake = ScriptedRunner(["hello world", "second"])
    assert isinstance(fake, Runner)
    fake.load()
    assert fake.loaded and fake.streams == 1 and fake.device == "cpu"
    speech = np.full(16_000, 0.1, np.float32)
    options = DecodeOptions(language="de")
    got = fake.decode_batch([DecodeRequest(speech, options), DecodeRequest(silence(1.0)),
                             DecodeRequest(speech), DecodeRequest(speech)])
    assert [t.text for t in got] == ["hello world", "", "second", "hello world"]
    assert got[0].language == "de" and [w.text for w in got[0].words] == [" hello", " world"]
    assert [n for n, _ in fake.calls] == [16_000] * 4 and fake.calls[0][1] == options


def test_scripted_runner_sleeps_its_decode_time_when_asked() -> None:
    slept: list[float] = []
    fake = ScriptedRunner(decode_ms=40.0, sleep=slept.append)
    fake.decode_batch([DecodeRequest(silence(0.5)), DecodeRequest(silence(0.5))])
    assert slept == [0.04, 0.04]


def test_tensorrt_runner_is_a_runner_and_says_what_it_needs(tmp_path: Path) -> None:
    trt = TensorRTLLMRunner(tmp_path / "whisper-engine")
    assert isinstance(trt, Runner)
    assert trt.device == "cuda" and trt.streams == 1 and trt.info.compute_type == "tensorrt"
    try:
        import tensorrt_llm  # noqa: F401
    except ImportError:
        with pytest.raises(DependencyMissingError, match="tensorrt_llm"):
            trt.load()
    else:
        pytest.skip("tensorrt_llm is installed here: load() needs a built engine instead")
