"""Build every live engine from the settings and the command line: dictation and captions in
the app, `sottovoce listen` and its captions, local (faster-whisper here) or remote (a
WebSocket server), listening to the microphone or playing a file as if it were one.

`make_engine` is the one entry: it picks the engine and builds it from the parts in
`app.engine_parts` (the local runner's layout on this machine, the policy's options, the remote
engine with its key), so `listen` runs the engine the app runs; tests hand the controller a
fake factory instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.app_engine import AppEngine, LocalAppEngine, RunningEngine
from app.captions import CaptionConfig, caption_engine
from app.engine_parts import live_options, live_runner, remote_engine
from engine.events import EventSink

if TYPE_CHECKING:
    from engine.audio.sources import AudioSource

MODES = ("ptt", "vad")


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
        return AppEngine(*caption_engine(config.captions, sink))
    if config.backend == "remote":
        return AppEngine(remote_engine(sink, config.remote_url, audio_source(config),
                                       language=config.language, mode=config.mode,
                                       vocabulary=config.vocabulary))
    return _local_engine(config, sink)


def audio_source(config: EngineConfig) -> AudioSource:
    """The microphone the settings name (the system default when it is not connected, or when
    it goes away while recording: the user is told), or the --input file."""
    from engine.audio.sources import FileSource, MicrophoneSource

    if config.input_path is not None:
        # Trailing silence lets voice activity detection see the end of the last sentence.
        return FileSource(config.input_path, realtime=config.realtime, tail_silence_s=1.0)
    return MicrophoneSource(config.input_device if config.input_device != "" else None,
                            fallback=config.microphone_fallback)


def _local_engine(config: EngineConfig, sink: EventSink) -> RunningEngine:
    from engine.audio.sources import MicrophoneSource
    from engine.live import LocalLiveEngine

    runner = live_runner(config.model, config.device, padded=config.padded,
                         compute_type=config.compute_type)
    options = live_options(config.mode, language=config.language, languages=config.languages,
                           vocabulary=config.vocabulary, partials=config.partials,
                           padded=config.padded, journal=config.journal)
    source = audio_source(config)
    engine = LocalLiveEngine(sink, source=source, runner=runner, options=options)
    microphone = source if isinstance(source, MicrophoneSource) else None
    return LocalAppEngine(engine, runner, microphone,
                          lambda model, device: live_runner(model, device, padded=config.padded,
                                                            compute_type=config.compute_type))
