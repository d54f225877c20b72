"""The live engine as the app drives it (`RunningEngine`), with what it can change while it
runs declared by the engine's kind instead of probed: a local engine reloads its model and
switches language and microphone in place and mutes its input for a cue; a remote or caption
engine does none of these, so the controller rebuilds it instead.

`app.engine_factory` builds one of these for each engine; tests hand the controller engines
that implement `RunningEngine` themselves (tests/support/ui_fake_engine.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from engine.types import ModelInfo, Runner

if TYPE_CHECKING:
    from engine.audio.sources import MicrophoneSource
    from engine.live import LocalLiveEngine


class Wrapped(Protocol):
    """What every engine the app runs has (local, remote and caption engines all do):
    `engine.events.LiveEngine`, stopping at once, waiting for its threads, and its journal."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def abort(self) -> None: ...
    def wait(self, timeout: float | None = None) -> bool: ...
    def begin_utterance(self) -> int | None: ...
    def end_utterance(self) -> None: ...
    def set_vocabulary(self, terms: tuple[str, ...]) -> None: ...
    @property
    def journal_path(self) -> str | None: ...


class RunningEngine(Wrapped, Protocol):
    """An engine as the app drives it: plus the status line's model and the changes it takes
    while running (each returns False, or ``can_mute_input`` is False, where this engine
    cannot: rebuild it)."""

    @property
    def model_info(self) -> ModelInfo | None: ...
    @property
    def can_mute_input(self) -> bool: ...

    def mute_input(self, seconds: float, at: int | None = None) -> int | None: ...
    def switch_model(self, model: str, device: str) -> bool: ...
    def set_input_device(self, name: str) -> bool: ...
    def set_language(self, language: str | None, languages: tuple[str, ...]) -> bool: ...


class AppEngine:
    """A `RunningEngine` over an engine that changes nothing while it runs (remote, captions):
    the calls go through, the live changes answer False. ``runner``: the local model the
    engine decodes with, for the status line (None: a server, which announces its model in
    the ready state's detail instead)."""

    def __init__(self, engine: Wrapped, runner: Runner | None = None) -> None:
        self.engine = engine
        self._runner = runner

    @property
    def model_info(self) -> ModelInfo | None:
        return self._runner.info if self._runner is not None else None

    @property
    def journal_path(self) -> str | None:
        """The engine's autosave journal (None: not journalling): the final's route writes
        each final's AI polish beside it, for History."""
        path = self.engine.journal_path
        return str(path) if path else None

    @property
    def can_mute_input(self) -> bool:
        return False

    def start(self) -> None:
        self.engine.start()

    def stop(self) -> None:
        self.engine.stop()

    def abort(self) -> None:
        self.engine.abort()

    def wait(self, timeout: float | None = None) -> bool:
        return self.engine.wait(timeout)

    def begin_utterance(self) -> int | None:
        return self.engine.begin_utterance()

    def end_utterance(self) -> None:
        self.engine.end_utterance()

    def set_vocabulary(self, terms: tuple[str, ...]) -> None:
        self.engine.set_vocabulary(terms)

    def mute_input(self, seconds: float, at: int | None = None) -> int | None:
        return None

    def switch_model(self, model: str, device: str) -> bool:
        return False

    def set_input_device(self, name: str) -> bool:
        return False

    def set_language(self, language: str | None, languages: tuple[str, ...]) -> bool:
        return False  # remote: the language is sent when connecting


class LocalAppEngine(AppEngine):
    """The local engine: it reloads another model (the microphone stays open), switches
    language and microphone in place, and mutes its input while a cue plays."""

    def __init__(self, engine: LocalLiveEngine, runner: Runner,
                 microphone: MicrophoneSource | None,
                 make_runner: Callable[[str, str], Runner]) -> None:
        super().__init__(engine, runner)
        self.local = engine
        self._microphone = microphone  # None: a file played as the microphone
        self._make_runner = make_runner

    @property
    def can_mute_input(self) -> bool:
        return True

    def mute_input(self, seconds: float, at: int | None = None) -> int | None:
        return self.local.mute_input(seconds, at=at)

    def switch_model(self, model: str, device: str) -> bool:
        """Load another model into the running engine (engine.live.LocalLiveEngine.reload: the
        microphone stays open, the model loads on a new inference thread)."""
        runner = self._make_runner(model, device)
        self.local.reload(runner)
        self._runner = runner
        return True

    def set_input_device(self, name: str) -> bool:
        """Record from microphone ``name`` ("": the default) without a reload; False when the
        source cannot switch (a file played as the microphone)."""
        if self._microphone is None:
            return False
        self._microphone.prefer(name or None)
        return True

    def set_language(self, language: str | None, languages: tuple[str, ...]) -> bool:
        self.local.set_language(language, languages)
        return True

