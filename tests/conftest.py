"""Shared fixtures: the speech corpus (tests/audio), the real bundled model, isolated user dirs;
the markers that keep the fast lane (``pytest -m "not model and not e2e"``) honest."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import warnings
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import worker_desktop, x_keyboard
from support.recordings import recording

from bench.evaluation import ManifestEntry, read_manifest

# Fixtures shared by several test files (tests/support).
pytest_plugins = ["support.controller", "support.hub", "support.pulse"]

REPO_ROOT = Path(__file__).resolve().parents[1]
# The speech corpus in the repository (tests/audio, FLAC); SOTTOVOCE_TEST_AUDIO names another
# folder with a manifest.jsonl of the same shape.
TEST_AUDIO = Path(os.environ.get("SOTTOVOCE_TEST_AUDIO") or REPO_ROOT / "tests" / "audio")
MANIFEST = TEST_AUDIO / "manifest.jsonl"

# -- markers -----------------------------------------------------------------------------------
# A test using one of these fixtures is marked `model` (they load Whisper, or start a server that
# does: WhisperLive loads faster-whisper in its own venv) or `e2e` (the desktop's sound server),
# without anyone having to remember it.
MODEL_FIXTURES = frozenset({"tiny_transcriber", "base_transcriber", "fast_transcriber", "shared_tiny",
                            "two_streams", "whisperlive"})
E2E_FIXTURES = frozenset({"virtual_mic", "two_mics"})
# The guard: outside `model` tests, constructing faster_whisper.WhisperModel (in this process, or
# in a Python process the test starts) fails the test, marker or not, so a missing marker cannot
# go unnoticed. Child processes get it through tests/model_guard/sitecustomize.py.
GUARD_ENV = "SOTTOVOCE_MODEL_GUARD"
GUARD_DIR = Path(__file__).resolve().parent / "model_guard"
_guard_record = Path(tempfile.gettempdir()) / f"sottovoce-model-guard-{os.getpid()}.txt"
_current: dict[str, Any] = {"guarded": False}


_own_desktop = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, every worker but the first gets a desktop of its own (the focused
    window, the clipboard and the microphone are one per desktop)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    if worker != "gw0" and os.environ.get("DISPLAY"):
        config.stash[_own_desktop] = worker_desktop.start(worker)


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_own_desktop, None)
    if folder is not None:
        worker_desktop.stop(folder)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & E2E_FIXTURES:
            item.add_marker(pytest.mark.e2e)
        # WhisperLive's server and the real app (end to end) load Whisper in their processes;
        # the llm tests load SmolLM2 in llama-cpp-python's server (and may first build its venv).
        if (fixtures & MODEL_FIXTURES or item.get_closest_marker("whisperlive")
                or item.get_closest_marker("llm") or item.get_closest_marker("e2e")):
            item.add_marker(pytest.mark.model)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Patch the one place a Whisper model is built, for the whole session (session-scoped
    fixtures run before any function-scoped one, so a fixture would come too late)."""
    # A background job of a non-interactive shell starts with Ctrl+C ignored, and so would
    # every process a test starts: the tests of Ctrl+C must not depend on how CI was started.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
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
    # (Recording decodes, tests/support/recordings.py, loads the model in replaying tests.)
    guarded = item.get_closest_marker("model") is None and not recording()
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
    restored = x_keyboard.restore()
    if restored:
        warnings.warn(f"{item.nodeid} left the desktop's keyboard changed: "
                      f"{'; '.join(restored)} (put back)", stacklevel=1)
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
    """The real bundled tiny.en model, loaded once per test session (CPU int8 here), as
    faster-whisper's own loop (`SequentialRunner`); ``.model`` is the loaded
    `FasterWhisperModel` other runners share (``Ct2Runner(tiny_transcriber.model)``)."""
    from engine.asr.sequential import SequentialRunner

    transcriber = SequentialRunner("tiny.en")
    transcriber.load()
    return transcriber
