"""Build every live engine from the settings and the command line: dictation and captions in
the app, `sottovoce listen` and its captions, local (faster-whisper here) or remote (a
WebSocket server), listening to the microphone or playing a file as if it were one.

The one place that knows the engines' constructors, the local runner's layout on this machine
(`live_layout`) and the policy's options (`live_options`), so `listen` runs the engine the app
runs; tests hand the controller a fake factory instead.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.app_engine import AppEngine, LocalAppEngine, RunningEngine
from engine.errors import EngineError
from engine.events import EventSink

if TYPE_CHECKING:
    from app.captions import CaptionConfig
    from engine.audio.sources import AudioSource
    from engine.live import LiveOptions
    from engine.remote.client import RemoteLiveEngine
    from engine.types import Runner

log = logging.getLogger(__name__)

MODES = ("ptt", "vad")
LIVE_CPU_STREAMS = 2  # decode streams of the live engine on a CPU (see live_layout)
LIVE_CPU_THREADS = 4  # CTranslate2 threads per stream at most (tiny models scale no further)


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
    vocabulary: tuple[str, ...] = ()  # the settings' default set (engine.vocabulary)
    languages: tuple[str, ...] = ()  # auto-detection chooses among these (engine.languages)
    input_device: int | str = ""  # the microphone by name or index ("": the system default)
    captions: CaptionConfig | None = None  # captions mode: sources, labels, translation
    partials: bool = True  # partial text while speaking (`listen --no-partials`: off)
    padded: bool = False  # faster-whisper's padded 30 s decode (`listen --padded`)
    journal: bool = True  # autosave finals (engine.journal)
    realtime: bool = True  # a file plays in real time (`listen --fast`: simulated time)
    microphone_fallback: bool = True  # a missing microphone falls back to the default

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        if self.backend not in ("local", "remote"):
            raise ValueError("backend must be 'local' or 'remote'")


EngineFactory = Callable[[EngineConfig, EventSink], RunningEngine]


def make_engine(config: EngineConfig, sink: EventSink) -> RunningEngine:
    """The real engine for `config`. Construction does no work; `start()` loads and opens."""
    if config.captions is not None:
        from app.captions import caption_engine

        return AppEngine(*caption_engine(config.captions, sink))
    if config.backend == "remote":
        return AppEngine(remote_engine(sink, config.remote_url, audio_source(config),
                                       language=config.language, mode=config.mode,
                                       vocabulary=config.vocabulary))
    return _local_engine(config, sink)


@dataclass(frozen=True)
class RunnerLayout:
    streams: int  # model replicas decoding at the same time
    cpu_threads: int  # CTranslate2 threads of each


def live_layout(cores: int | None = None) -> RunnerLayout:
    """The live runner's layout on this machine, for every live engine (dictation, captions,
    `listen`). Two decode streams (replicas sharing the weights) on a CPU with two cores or
    more, so a final never waits behind a partial and is decoded speculatively while the end
    of the utterance is confirmed (engine.core.policy.speculation); each replica gets all the
    cores up to `LIVE_CPU_THREADS`, since a lone final, the usual case, then decodes as fast
    as on one all-cores model (docs/evidence.md). CUDA keeps one stream (engine.asr)."""
    cores = cores or os.cpu_count() or 1
    return RunnerLayout(streams=max(1, min(LIVE_CPU_STREAMS, cores)),
                        cpu_threads=min(LIVE_CPU_THREADS, cores))


def live_runner(model: str, device: str, *, padded: bool = False) -> Runner:
    """The live engine's runner for ``model``, laid out by `live_layout`, not loaded."""
    try:
        from engine.asr import local_runner
    except ImportError as exc:
        raise EngineError(f"the local engine is not available: {exc}") from exc
    layout = live_layout()
    return local_runner(model, device=device, fast=not padded, streams=layout.streams,
                        cpu_threads=layout.cpu_threads)


def live_options(mode: str, *, language: str | None = None, languages: tuple[str, ...] = (),
                 vocabulary: tuple[str, ...] = (), partials: bool = True, padded: bool = False,
                 journal: bool = True, task: str = "transcribe",
                 commit_stable: bool = False) -> LiveOptions:
    """The local engine's options (its policy's among them) for every live engine."""
    try:
        from engine.core.policy import PolicyOptions
        from engine.live import LiveOptions
    except ImportError as exc:
        raise EngineError(f"the local live engine is not available: {exc}") from exc
    return LiveOptions(mode=mode, journal=journal, policy=PolicyOptions(
        language=language, languages=languages, vocabulary=vocabulary, partials=partials,
        short_context=not padded, task=task, commit_stable=commit_stable))


def audio_source(config: EngineConfig) -> AudioSource:
    """The microphone the settings name (the system default when it is not connected, or when
    it goes away while recording: the user is told), or the --input file."""
    from engine.audio.sources import FileSource, MicrophoneSource

    if config.input_path is not None:
        # Trailing silence lets voice activity detection see the end of the last sentence.
        return FileSource(config.input_path, realtime=config.realtime, tail_silence_s=1.0)
    return MicrophoneSource(config.input_device if config.input_device != "" else None,
                            fallback=config.microphone_fallback)


def remote_engine(sink: EventSink, url: str, source: AudioSource, *, language: str | None,
                  mode: str, vocabulary: tuple[str, ...]) -> RemoteLiveEngine:
    """The engine on a remote server, with the API key the keyring holds for ``url`` (none
    when there is no keyring: a server without keys still serves)."""
    from engine.remote.secrets import KeyringUnavailableError, load_api_key

    try:
        from engine.remote.client import RemoteLiveEngine
    except ImportError as exc:
        raise EngineError(f"the remote backend is not available: {exc}") from exc
    try:
        api_key = load_api_key(url)
    except KeyringUnavailableError as exc:
        log.warning("%s", exc)
        api_key = None
    engine = RemoteLiveEngine(sink, url=url, api_key=api_key, language=language, mode=mode,
                              source=source)
    engine.set_vocabulary(vocabulary)
    return engine


def _local_engine(config: EngineConfig, sink: EventSink) -> RunningEngine:
    from engine.audio.sources import MicrophoneSource
    from engine.live import LocalLiveEngine

    runner = live_runner(config.model, config.device, padded=config.padded)
    options = live_options(config.mode, language=config.language, languages=config.languages,
                           vocabulary=config.vocabulary, partials=config.partials,
                           padded=config.padded, journal=config.journal)
    source = audio_source(config)
    engine = LocalLiveEngine(sink, source=source, runner=runner, options=options)
    microphone = source if isinstance(source, MicrophoneSource) else None
    return LocalAppEngine(engine, runner, microphone,
                          lambda model, device: live_runner(model, device, padded=config.padded))
