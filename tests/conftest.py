"""Shared fixtures: the shared speech corpus, the real bundled model, isolated user dirs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.evaluation import ManifestEntry, read_manifest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_AUDIO = Path(os.environ.get("SOTTOVOCE_SHARED_AUDIO", REPO_ROOT.parent / "shared" / "audio"))
MANIFEST = SHARED_AUDIO / "manifest.jsonl"


@pytest.fixture(autouse=True)
def isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Config and journal go to a temp dir; the model cache stays shared (joining base is slow)."""
    root = tmp_path_factory.mktemp("user")
    monkeypatch.setenv("SOTTOVOCE_CONFIG_DIR", str(root / "config"))
    monkeypatch.setenv("SOTTOVOCE_DATA_DIR", str(root / "data"))


@pytest.fixture(scope="session")
def shared_audio() -> Path:
    if not MANIFEST.is_file():
        pytest.fail(f"shared speech corpus not found at {SHARED_AUDIO} (set SOTTOVOCE_SHARED_AUDIO)")
    return SHARED_AUDIO


@pytest.fixture(scope="session")
def manifest(shared_audio: Path) -> list[ManifestEntry]:
    return read_manifest(shared_audio / "manifest.jsonl")


@pytest.fixture(scope="session")
def jfk_wav(shared_audio: Path) -> Path:
    return shared_audio / "jfk-inaugural-1961-excerpt.wav"


@pytest.fixture(scope="session")
def tiny_transcriber():  # type: ignore[no-untyped-def]
    """The real bundled tiny.en model, loaded once per test session (CPU int8 here), as
    faster-whisper's own loop (`SequentialRunner`); ``.model`` is the loaded
    `FasterWhisperModel` other runners share (``Ct2Runner(tiny_transcriber.model)``)."""
    from engine.asr.sequential import SequentialRunner

    transcriber = SequentialRunner("tiny.en")
    transcriber.load()
    return transcriber
