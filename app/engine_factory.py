"""Build the live engine the settings ask for: local (faster-whisper here) or remote (a
WebSocket server), listening to the microphone or playing a file as if it were one.

Kept apart from the controller so tests hand the controller a fake factory, and so the one
place that knows the engines' constructors is small.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.captions import CaptionConfig
from engine.errors import EngineError
from engine.events import EventSink, LiveEngine
from engine.types import ModelInfo, Runner

log = logging.getLogger(__name__)

MODES = ("ptt", "vad")
LIVE_CPU_STREAMS = 2  # decode streams of the local live engine on a CPU (see _local_engine)
LIVE_CPU_THREADS = 4  # CTranslate2 threads per stream at most (tiny models scale no further)


@dataclass(frozen=True)
class EngineConfig:
    """mode "ptt": transcribe only between begin/end_utterance (dictation);
    "vad": voice activity decides (captions, and files played with --input)."""

    backend: str = "local"
    remote_url: str = ""
    model: str = "tiny.en"
    device: str = "auto"
    compute_type: str = "auto"  # "auto": measured best for this processor (engine.compute_choice)
    language: str | None = None
    mode: str = "ptt"
    input_path: Path | None = None
    vocabulary: tuple[str, ...] = ()  # the settings' default set (engine.vocabulary)
    languages: tuple[str, ...] = ()  # auto-detection chooses among these (engine.languages)
    input_device: str = ""  # the microphone by name ("": the system default)
    captions: CaptionConfig | None = None  # captions mode: sources, labels, translation

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        if self.backend not in ("local", "remote"):
            raise ValueError("backend must be 'local' or 'remote'")


EngineFactory = Callable[[EngineConfig, EventSink], LiveEngine]


def make_engine(config: EngineConfig, sink: EventSink) -> LiveEngine:
    """The real engine for `config`. Construction does no work; `start()` loads and opens."""
    if config.captions is not None:
        from app.captions import caption_engine

        engine, runner = caption_engine(config.captions, sink)
        return AppEngine(engine, runner)
    if config.backend == "remote":
        return _remote_engine(config, sink)
    return _local_engine(config, sink)


class AppEngine:
    """The engine plus what the status line needs (model, device, compute type), which the
    LiveEngine protocol doesn't carry."""

    def __init__(self, engine: Any, runner: Runner | None = None, source: Any = None,
                 compute_type: str = "auto") -> None:
        self.engine = engine
        self._runner = runner
        self._source = source
        self._compute_type = compute_type  # the settings' choice, kept when the model changes

    @property
    def model_info(self) -> ModelInfo | None:
        if self._runner is not None:
            return self._runner.info
        info = getattr(self.engine, "model_info", None)  # the remote engine's, once connected
        return info if isinstance(info, ModelInfo) else None

    @property
    def journal_path(self) -> str | None:
        """The engine's autosave journal (None: not journalling): the controller writes each
        final's AI polish beside it, for History."""
        path = getattr(self.engine, "journal_path", None)
        return str(path) if path else None

    def start(self) -> None:
        self.engine.start()

    def stop(self) -> None:
        self.engine.stop()

    def begin_utterance(self) -> int | None:
        at: int | None = self.engine.begin_utterance()
        return at

    def end_utterance(self) -> None:
        self.engine.end_utterance()

    def set_vocabulary(self, terms: tuple[str, ...]) -> None:
        self.engine.set_vocabulary(terms)

    def switch_model(self, model: str, device: str) -> bool:
        """Load another model into the running engine (engine.live.LocalLiveEngine.reload: the
        microphone stays open, the model loads on a new inference thread); False where the
        engine cannot (remote: the server has the model)."""
        reload = getattr(self.engine, "reload", None)
        if reload is None or self._runner is None:
            return False
        runner = _live_runner(model, device, self._compute_type)
        reload(runner)
        self._runner = runner
        return True

    def set_input_device(self, name: str) -> bool:
        """Record from microphone ``name`` ("": the default) without a reload; False when the
        source cannot switch (a file played as the microphone)."""
        prefer = getattr(self._source, "prefer", None)
        if prefer is None:
            return False
        prefer(name or None)
        return True

    def set_language(self, language: str | None, languages: tuple[str, ...]) -> bool:
        """Change the language without a reload; False when this engine cannot (remote: the
        language is sent when connecting, so the caller rebuilds it)."""
        setter = getattr(self.engine, "set_language", None)
        if setter is None:
            return False
        setter(language, languages)
        return True


def audio_source(config: EngineConfig) -> Any:
    """The microphone the settings name (the system default when it is not connected, or when
    it goes away while recording: the user is told), or the --input file in real time."""
    from engine.audio.sources import FileSource, MicrophoneSource

    if config.input_path is not None:
        # Trailing silence lets voice activity detection see the end of the last sentence.
        return FileSource(config.input_path, realtime=True, tail_silence_s=1.0)
    return MicrophoneSource(config.input_device or None, fallback=True)


def _local_engine(config: EngineConfig, sink: EventSink) -> LiveEngine:
    try:
        from engine.core.policy import PolicyOptions
        from engine.live import LiveOptions, LocalLiveEngine
    except ImportError as exc:
        raise EngineError(f"the local live engine is not available: {exc}") from exc
    # Two decode streams (replicas sharing the weights) on a CPU with two cores or more: a
    # final never waits behind a partial, and is decoded speculatively while the end of the
    # utterance is confirmed (engine.core.policy.speculation). CUDA keeps one. Each replica gets all
    # the cores (up to LIVE_CPU_THREADS): a lone final, the usual case, then decodes as fast as
    # on one all-cores model; one-thread replicas made each final slower, and two decodes at
    # once were no faster (docs/evidence.md).
    runner = _live_runner(config.model, config.device, config.compute_type)
    options = LiveOptions(mode=config.mode, policy=PolicyOptions(
        language=config.language, languages=config.languages, vocabulary=config.vocabulary))
    source = audio_source(config)
    engine = LocalLiveEngine(sink, source=source, runner=runner, options=options)
    return AppEngine(engine, runner, source, compute_type=config.compute_type)


def _live_runner(model: str, device: str, compute_type: str = "auto") -> Runner:
    """The live engine's runner for ``model`` (see `_local_engine` for the layout), not loaded."""
    from engine.asr import local_runner

    cores = os.cpu_count() or 1
    return local_runner(model, device=device, streams=max(1, min(LIVE_CPU_STREAMS, cores)),
                        cpu_threads=min(LIVE_CPU_THREADS, cores), compute_type=compute_type)


def _remote_engine(config: EngineConfig, sink: EventSink) -> LiveEngine:
    from engine.remote.secrets import KeyringUnavailableError, load_api_key

    try:
        from engine.remote.client import RemoteLiveEngine
    except ImportError as exc:
        raise EngineError(f"the remote backend is not available: {exc}") from exc
    try:
        api_key = load_api_key(config.remote_url)
    except KeyringUnavailableError as exc:
        log.warning("%s", exc)
        api_key = None
    source = audio_source(config)
    engine = RemoteLiveEngine(sink, url=config.remote_url, api_key=api_key,
                              language=config.language, mode=config.mode, source=source)
    engine.set_vocabulary(config.vocabulary)
    return AppEngine(engine, source=source)
