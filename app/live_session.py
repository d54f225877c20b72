"""The live engine of the running app: its lifecycle, language, model and microphone (GUI
thread). The controller calls `start`/`stop` and hands changed settings to `apply`; the
engine's own events reach the windows through the bridge, and `on_state` follows its state.

Each engine instance has its own sink (`_sink`): after a restart the old engine is still
flushing, so its final text is kept but its lifecycle events must not overwrite the new one's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from app.app_engine import RunningEngine
from app.caption_wiring import caption_config
from app.engine_factory import EngineConfig, EngineFactory
from app.settings import ENGINE_FIELDS, Settings
from engine.events import Event, EventSink, FinalText
from engine.languages import LANGUAGES, language_name, next_language, parse_languages
from engine.model_catalog import installed, is_english_only
from engine.vocabulary import parse as parse_vocabulary
from ui.caption_window import CaptionWindow
from ui.main_window import MainWindow
from ui.qt_compat import emit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LaunchOptions:
    """Command-line overrides: --input FILE plays a file as the microphone (captions mode),
    --exit-after-input quits after its last final text, --model overrides the settings."""

    input_path: Path | None = None
    exit_after_input: bool = False
    model: str | None = None
    enable_hotkey: bool = True


class LiveSession(QObject):
    """Starts, stops and changes the live engine. ``settings`` reads the current settings and
    ``update`` saves changes to them; ``sink`` receives every engine's events."""

    language_shown = Signal(str, bool)  # the current language in words; whether it can cycle
    engine_created = Signal(object, object)  # the new engine, the vocabulary it was made with

    def __init__(self, settings: Callable[[], Settings], update: Callable[..., None],
                 options: LaunchOptions, factory: EngineFactory, sink: EventSink,
                 window: MainWindow, captions: CaptionWindow,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._settings, self._update = settings, update
        self.options = options
        self._factory = factory
        self._events = sink
        self.window, self.captions = window, captions
        self.engine: RunningEngine | None = None
        self.state = "stopped"
        self.talking = False  # push-to-talk held (or toggled on); a stopped engine hears nothing
        self.refuse_live: Callable[[], bool] = lambda: False  # an import pauses live listening
        self._generation = 0  # which engine instance is current (see _sink)
        self._stopping: list[RunningEngine] = []  # stopped engines whose threads may still run

    # -- the engine ----------------------------------------------------------------------------
    def config(self) -> EngineConfig:
        s = self._settings()
        captions = s.listen_mode == "captions" or self.options.input_path is not None
        # A catalogue model made for English (distil-large-v3, the .en ones) decodes English.
        language = "en" if self.english_only() else (s.language or None)
        return EngineConfig(backend=s.backend, remote_url=s.remote_url, model=self.model_name(),
                            device=s.device, compute_type=s.compute_type, language=language,
                            mode="vad" if captions else "ptt",
                            input_path=self.options.input_path,
                            vocabulary=self.vocabulary_terms(),
                            languages=self.spoken_languages(), input_device=s.input_device,
                            captions=caption_config(s, self.model_name(), self.options.input_path,
                                                    self.vocabulary_terms()) if captions else None)

    @Slot()
    def start(self) -> None:
        if self.engine is not None or self.refuse_live():
            return
        self.window.latency.reset()
        self.window.set_state("loading", self.model_name())
        self._generation += 1
        try:
            config = self.config()
            self.engine = self._factory(config, self._sink(self._generation))
            emit(self.engine_created, self.engine, config.vocabulary)
            self.engine.start()
        except Exception as exc:  # noqa: BLE001 - any setup failure is shown, not raised
            log.exception("engine failed to start")
            self.engine = None
            self.window.set_state("failed", str(exc))
            self.window.show_message(f"Could not start: {exc}", 20000)

    def _sink(self, generation: int) -> EventSink:
        """The sink for one engine instance (module docstring). Called on engine threads;
        reads one int."""
        def sink(event: Event) -> None:
            if generation == self._generation or isinstance(event, FinalText):
                self._events(event)
        return sink

    @Slot()
    def stop(self) -> None:
        engine, self.engine = self.engine, None
        self.talking = False
        if engine is not None:
            engine.stop()  # flushes the utterance in flight; its final still arrives
            # Kept until its threads end (see wait_stopped); those already done are dropped,
            # so a session with many restarts doesn't keep old models in memory.
            self._stopping = [e for e in self._stopping if not e.wait(0.0)] + [engine]

    def restart(self) -> None:
        self.stop()
        self.start()

    def stopped_engines(self) -> list[RunningEngine]:
        """Stopped engines that may still be flushing (a copy, safe to hand to a thread)."""
        return list(self._stopping)

    def abort(self) -> None:
        """Stop every engine at once (no utterance flushed, no server's last final awaited);
        what they delivered before is kept."""
        for engine in [self.engine, *self._stopping]:
            if engine is not None:
                engine.abort()

    def wait_stopped(self, timeout: float) -> None:
        """Let stopped engines' threads finish their flush: native libraries abort the process
        if the interpreter shuts down under a running decode."""
        for engine in self._stopping:
            if not engine.wait(timeout):
                log.warning("engine still busy after %.0f s; quitting anyway", timeout)
        self._stopping.clear()

    def on_state(self, state: str, detail: str) -> None:
        log.info("engine state %s %s", state, detail)
        self.state = state
        self.window.set_state(state, detail)
        info = self.engine.model_info if self.engine is not None else None
        if state == "ready" and info is not None:
            self.window.set_model_info(info.name, info.device, info.compute_type)
        elif state == "ready" and self._settings().backend == "remote":
            # The server decides model and device; show what it announced.
            self.window.model_label.setText(f"remote · {detail or self._settings().remote_url}")

    def on_failed(self, recoverable: bool) -> None:
        if not recoverable:
            self.engine = None

    def apply_engine(self, old: Settings, new: Settings) -> bool:
        """Carry changed settings into the running engine: a new model alone reloads in it and
        a microphone switches in place where it can; any other engine setting rebuilds it.
        Whether it was rebuilt."""
        if self.engine is None:
            return False
        changed = {f for f in ENGINE_FIELDS if getattr(old, f) != getattr(new, f)}
        if changed and not (changed <= {"model", "device"} and new.backend == "local"
                            and self.engine.switch_model(self.model_name(), new.device)):
            self.restart()
            return True
        if old.input_device != new.input_device:
            self.set_input_device(new.input_device)
        return False

    def apply_language(self, old: Settings, new: Settings) -> None:
        """A changed language switches the running engine in place, or rebuilds it."""
        if self.engine is not None and (old.language, old.languages) != (
                new.language, new.languages) and not self.engine.set_language(
                    new.language or None, self.spoken_languages()):
            self.restart()

    # -- model, language, microphone -----------------------------------------------------------
    def model_name(self) -> str:
        return self.options.model or self._settings().model

    def show_models(self) -> None:
        """The main window's model list: what is here now (Settings > Models downloads more)."""
        folders = [line for line in self._settings().model_dirs.splitlines() if line.strip()]
        self.window.set_models([m.name for m in installed(folders)])

    def vocabulary_terms(self, sets: tuple[str, ...] = ()) -> tuple[str, ...]:
        """The settings' default vocabulary set plus the named ``sets``."""
        return parse_vocabulary(self._settings().vocabulary).terms(sets)

    def spoken_languages(self) -> tuple[str, ...]:
        return parse_languages(self._settings().languages)

    def english_only(self) -> bool:
        return self._settings().backend == "local" and is_english_only(self.model_name())

    @Slot()
    def cycle_language(self) -> None:
        """The language hotkey and tray entry: auto-detect -> each spoken language -> ..."""
        if self.english_only():
            self.window.show_message(f"{self.model_name()} is an English-only model", 5000)
            return
        self.set_language(next_language(self._settings().language, self.spoken_languages()))

    def set_language(self, code: str) -> None:
        """Decode in ``code`` ("": auto-detect among the spoken languages) from now on: the
        running engine switches without a reload where it can."""
        old = self._settings().language
        self._update(language=code)
        self.show_language()
        if self.engine is None or old == code:
            return
        if not self.engine.set_language(code or None, self.spoken_languages()):
            self.restart()  # (remote: the language goes with the connection)
        self.window.show_message(f"Language: {self.language_label()}", 3000)

    def set_input_device(self, name: str) -> None:
        """Record from microphone ``name`` ("": the system default): remembered by name, and
        the running engine switches without a reload (engine.audio.sources.prefer)."""
        if self._settings().input_device != name:
            self._update(input_device=name)
        if self.engine is not None and not self.engine.set_input_device(name):
            self.restart()

    def language_label(self) -> str:
        if self.english_only():
            return "English (English-only model)"
        code = self._settings().language
        if code:
            return language_name(code)
        spoken = self.spoken_languages()
        return "Auto-detect" + (f" ({', '.join(language_name(c) for c in spoken)})"
                                if spoken else "")

    def show_language(self) -> None:
        """The current language in the main window's selector and the caption window."""
        spoken = self.spoken_languages()
        language = self._settings().language
        self.window.set_languages([(c, language_name(c)) for c in spoken or LANGUAGES],
                                  language, self.english_only())
        code = "en" if self.english_only() else language
        self.captions.set_language_tag(code.upper() if code else "AUTO", self.language_label())
        emit(self.language_shown, self.language_label(), not self.english_only())
