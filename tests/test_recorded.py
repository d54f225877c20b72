"""Recorded decodes (engine/asr/recorded.py): what is recorded replays as it was decoded, and a
request that was never recorded fails, saying how to record it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.evaluation import ManifestEntry
from engine.asr.fake import ScriptedRunner
from engine.asr.recorded import RecordingMissing, RecordingRunner, ReplayRunner, request_key
from engine.audio.decode import load_audio
from engine.errors import EngineError
from engine.types import DecodeOptions, DecodeRequest, Runner


def speech(seconds: float = 1.0, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.1 * rng.standard_normal(int(seconds * 16_000))).astype(np.float32)


def test_a_recording_replays_what_was_decoded(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    requests = [DecodeRequest(speech(1.0, 0)), DecodeRequest(speech(2.0, 1),
                                                                 DecodeOptions(beam_size=1)),
                DecodeRequest(np.zeros(8000, np.float32))]  # silent: an empty transcript
    recorder = RecordingRunner(ScriptedRunner(["hello world", "the second one"]), path)
    decoded = recorder.decode_batch(requests)
    replay = ReplayRunner(path)
    assert replay.decode_batch(requests) == decoded
    assert [t.text for t in decoded] == ["hello world", "the second one", ""]
    assert replay.info.name == "scripted" and len(replay.replayed) == 3
    header, *records = [json.loads(line) for line in path.read_text().splitlines()]
    assert header["model"]["name"] == "scripted" and len(records) == 3
    assert records[1]["request"] == "2.00 s of audio, options {'beam_size': 1}"


def test_a_request_never_recorded_says_how_to_record_it(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    RecordingRunner(ScriptedRunner(), path).decode_batch([DecodeRequest(speech())])
    replay = ReplayRunner(path)
    for other in (DecodeRequest(speech(seed=5)), DecodeRequest(speech(), DecodeOptions(
            language="en")), DecodeRequest(speech(), timestamps=False)):
        with pytest.raises(RecordingMissing, match="SOTTOVOCE_RECORD=1"):
            replay.decode_batch([other])
    with pytest.raises(RecordingMissing, match="no recorded decodes at"):
        ReplayRunner(tmp_path / "absent.jsonl").load()
    (tmp_path / "bad.jsonl").write_text('{"format": "other"}\n')
    with pytest.raises(EngineError, match="not a file of recorded decodes"):
        ReplayRunner(tmp_path / "bad.jsonl").load()


def test_the_key_ignores_noise_below_16_bits_only() -> None:
    audio = np.round(speech() * 32768) / np.float32(32768)  # a 16-bit recording, as decoded
    key = request_key(DecodeRequest(audio), "tiny.en")
    assert request_key(DecodeRequest(audio + np.float32(1e-6)), "tiny.en") == key
    louder = audio.copy()
    louder[100] += 0.01
    assert request_key(DecodeRequest(louder), "tiny.en") != key
    assert request_key(DecodeRequest(audio), "base") != key


@pytest.mark.model
def test_a_real_decode_replays_exactly(tiny_transcriber: Runner, manifest: list[ManifestEntry],
                                       tmp_path: Path) -> None:
    """The real model's transcript (words, times, quality figures) survives the round trip."""
    from engine.asr.ct2_decoder import Ct2Runner

    fast = Ct2Runner(tiny_transcriber.model)  # type: ignore[attr-defined]
    fast.load()
    entry = next(e for e in manifest if e.path.name.startswith("jfk"))
    request = DecodeRequest(load_audio(entry.path), DecodeOptions(beam_size=1))
    decoded = RecordingRunner(fast, tmp_path / "r.jsonl").decode_batch([request])
    replayed = ReplayRunner(tmp_path / "r.jsonl").decode_batch([request])
    assert replayed == decoded and replayed[0].words == decoded[0].words
    assert replayed[0].text and replayed[0].words
