"""Build the live engine the settings ask for: local (faster-whisper here) or remote (a
WebSocket server), listening to the microphone or playing a file as if it were one.

Kept apart from the controller so tests hand the controller a fake factory, and so the one
place that knows the engines' constructors is small.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.errors import EngineError
from engine.events import EventSink, LiveEngine

log = logging.getLogger(__name__)

MODES = ("ptt", "vad")


@dataclass(frozen=True)
class EngineConfig:
    """mode "ptt": transcribe only between begin/end_utterance (dictation);
    "vad": voice activity decides (captions, and files played with --input)."""

    backend: str = "local"
    remote_url: str = ""
    model: str = "tiny.en"
    device: str = "auto"
    language: str | None = None
    mode: str = "ptt"
    input_path: Path | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        if self.backend not in ("local", "remote"):
            raise ValueError("backend must be 'local' or 'remote'")


EngineFactory = Callable[[EngineConfig, EventSink], LiveEngine]


def make_engine(config: EngineConfig, sink: EventSink) -> LiveEngine:
    """The real engine for `config`. Construction does no work; `start()` loads and opens."""
    if config.backend == "remote":
        return _remote_engine(config, sink)
    return _local_engine(config, sink)


def _local_engine(config: EngineConfig, sink: EventSink) -> LiveEngine:
    try:
        from engine.live import LocalLiveEngine
    except ImportError as exc:
        raise EngineError(f"the local live engine is not available: {exc}") from exc
    return LocalLiveEngine(sink=sink, model=config.model, device=config.device,  # type: ignore[call-arg]
                           language=config.language, mode=config.mode,
                           input_path=config.input_path)


def _remote_engine(config: EngineConfig, sink: EventSink) -> LiveEngine:
    from app.secrets import KeyringUnavailableError, load_api_key

    try:
        from engine.remote.client import RemoteLiveEngine
    except ImportError as exc:
        raise EngineError(f"the remote backend is not available: {exc}") from exc
    try:
        api_key = load_api_key(config.remote_url)
    except KeyringUnavailableError as exc:
        log.warning("%s", exc)
        api_key = None
    return RemoteLiveEngine(sink=sink, url=config.remote_url, api_key=api_key,  # type: ignore[call-arg]
                            language=config.language, mode=config.mode,
                            input_path=config.input_path)
