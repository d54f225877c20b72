"""Shared fixtures: the shared speech corpus, the real bundled model, isolated user dirs; the
markers that keep the fast lane (``pytest -m "not model and not e2e"``) honest."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.evaluation import ManifestEntry, read_manifest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_AUDIO = Path(os.environ.get("SOTTOVOCE_SHARED_AUDIO", REPO_ROOT.parent / "shared" / "audio"))
MANIFEST = SHARED_AUDIO / "manifest.jsonl"

# -- markers -----------------------------------------------------------------------------------
# A test using one of these fixtures is marked `model` (they load Whisper, or start a server that
# does: WhisperLive loads faster-whisper in its own venv) or `e2e` (the desktop's sound server),
# without anyone having to remember it.
MODEL_FIXTURES = frozenset({"tiny_transcriber", "base_transcriber", "fast_transcriber", "shared_tiny",
                            "two_streams", "whisperlive"})
E2E_FIXTURES = frozenset({"virtual_mic"})
# The guard: outside `model` tests, constructing faster_whisper.WhisperModel (in this process, or
# in a Python process the test starts) fails the test, marker or not, so a missing marker cannot
# go unnoticed. Child processes get it through tests/model_guard/sitecustomize.py.
GUARD_ENV = "SOTTOVOCE_MODEL_GUARD"
GUARD_DIR = Path(__file__).resolve().parent / "model_guard"
_guard_record = Path(tempfile.gettempdir()) / f"sottovoce-model-guard-{os.getpid()}.txt"
_current: dict[str, Any] = {"guarded": False}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & MODEL_FIXTURES or item.get_closest_marker("whisperlive"):
            item.add_marker(pytest.mark.model)
        if fixtures & E2E_FIXTURES:
            item.add_marker(pytest.mark.e2e)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Patch the one place a Whisper model is built, for the whole session (session-scoped
    fixtures run before any function-scoped one, so a fixture would come too late)."""
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(GUARD_DIR), *filter(None, [os.environ.get("PYTHONPATH")])])
    try:
        from faster_whisper import WhisperModel
    except ImportError:
        return  # no faster-whisper: no model can load
    original = WhisperModel.__init__

    def guarded_init(self: Any, *args: Any, **kwargs: Any) -> None:
        if _current["guarded"]:
            with _guard_record.open("a", encoding="utf-8") as record:
                record.write(f"pid {os.getpid()}: in the test process\n")
            raise RuntimeError("a Whisper model was loaded by a test without @pytest.mark.model")
        original(self, *args, **kwargs)

    WhisperModel.__init__ = guarded_init  # type: ignore[method-assign]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    guarded = item.get_closest_marker("model") is None
    _current["guarded"] = guarded
    _guard_record.unlink(missing_ok=True)
    if guarded:
        os.environ[GUARD_ENV] = str(_guard_record)
    else:
        os.environ.pop(GUARD_ENV, None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield
    _current["guarded"] = False
    os.environ.pop(GUARD_ENV, None)
    if _guard_record.exists():
        loads = _guard_record.read_text(encoding="utf-8").strip()
        _guard_record.unlink()
        pytest.fail(f"{item.nodeid} loads a Whisper model but is not marked `model` "
                    f"(add @pytest.mark.model, or use a fixture from tests/conftest.py "
                    f"MODEL_FIXTURES):\n{loads}", pytrace=False)


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
