"""Shared fixtures: the speech corpus, the real bundled model, isolated user dirs."""

from __future__ import annotations

import json
import os
import wave
from pathlib import Path

import pytest

from engine.evaluation import ManifestEntry, read_manifest

REPO_ROOT = Path(__file__).resolve().parents[1]
# The speech corpus in the repository (tests/audio, FLAC); SOTTOVOCE_TEST_AUDIO names another
# folder with a manifest.jsonl of the same shape.
TEST_AUDIO = Path(os.environ.get("SOTTOVOCE_TEST_AUDIO") or REPO_ROOT / "tests" / "audio")
MANIFEST = TEST_AUDIO / "manifest.jsonl"


@pytest.fixture(autouse=True)
def isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Config and journal go to a temp dir; the model cache stays shared (joining base is slow)."""
    root = tmp_path_factory.mktemp("user")
    monkeypatch.setenv("SOTTOVOCE_CONFIG_DIR", str(root / "config"))
    monkeypatch.setenv("SOTTOVOCE_DATA_DIR", str(root / "data"))


@pytest.fixture(scope="session")
def shared_audio(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The speech corpus as a folder of WAVs with its manifest.jsonl: tests name clips by their
    ``.wav`` names and some hand them to tools that want a WAV (paplay). The repository keeps
    them as FLAC (half the size, the same samples), so those are decoded once per session."""
    if not MANIFEST.is_file():
        pytest.fail(f"speech corpus not found at {TEST_AUDIO} (set SOTTOVOCE_TEST_AUDIO)")
    rows = [json.loads(line) for line in MANIFEST.read_text(encoding="utf-8").splitlines()
            if line.strip()]
    if all(Path(row["file"]).suffix == ".wav" and "/" not in row["file"] for row in rows):
        return TEST_AUDIO
    return wav_copy(TEST_AUDIO, rows, tmp_path_factory.mktemp("speech"))


def wav_copy(source: Path, rows: list[dict[str, object]], target: Path) -> Path:
    """``target`` with one 16 kHz mono 16-bit WAV per manifest row (sample for sample what PyAV
    decodes from the source file) and a manifest.jsonl naming them."""
    import av
    import numpy as np

    for row in rows:
        path = source / str(row["file"])
        with av.open(str(path)) as container:
            stream = container.streams.audio[0]
            if (stream.rate, stream.channels) != (16000, 1):
                pytest.fail(f"{path}: {stream.rate} Hz, {stream.channels} ch (want 16000 Hz mono)")
            frames = [f.to_ndarray().reshape(-1) for f in container.decode(stream)]
        samples = np.concatenate(frames)
        if samples.dtype != np.int16:
            pytest.fail(f"{path}: {samples.dtype} samples, want 16-bit")
        row["file"] = path.stem + ".wav"
        with wave.open(str(target / str(row["file"])), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(16000)
            out.writeframes(samples.astype("<i2").tobytes())
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    (target / "manifest.jsonl").write_text(lines, encoding="utf-8")
    return target


@pytest.fixture(scope="session")
def manifest(shared_audio: Path) -> list[ManifestEntry]:
    return read_manifest(shared_audio / "manifest.jsonl")


@pytest.fixture(scope="session")
def jfk_wav(shared_audio: Path) -> Path:
    return shared_audio / "jfk-inaugural-1961-excerpt.wav"


@pytest.fixture(scope="session")
def tiny_transcriber():  # type: ignore[no-untyped-def]
    """The real bundled tiny.en model, loaded once per test session (CPU int8 here)."""
    from engine.asr.faster_whisper_backend import FasterWhisperTranscriber

    transcriber = FasterWhisperTranscriber("tiny.en")
    transcriber.load()
    return transcriber
