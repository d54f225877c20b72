"""Wiring: engine <-> UI <-> hotkeys/control socket <-> text injection <-> export, all on the GUI
thread. The parts it wires do the work: `app.live_session` starts, stops and changes the live
engine (language, model, microphone); `app.final_route` takes each final through the rules,
AI polish, insertion and the journal; `app.hotkey_set` owns the global hotkeys;
`app.dictation` push-to-talk and its extras; `app.import_flow` File > Open file…; `app.voice_edit`
voice edits of a selection; `app.desktop_routes` the desktop's hotkey and insertion routes.
The engine and the hotkey listeners call in through queued signals.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QApplication

from app.app_engine import RunningEngine
from app.caption_wiring import caption_style
from app.checked_inject import checked
from app.desktop_routes import DesktopRoutes
from app.dictation import Dictation
from app.dictation_text import TextWorker
from app.engine_factory import EngineFactory, make_engine
from app.final_route import FinalRoute
from app.hotkey_set import Hotkeys
from app.import_flow import ImportFlow, RunnerFactory
from app.inject import TextInjector, copy_to_clipboard
from app.live_session import LaunchOptions, LiveSession
from app.polish import Polisher, ServerConfig
from app.session import Session
from app.settings import Settings, save_settings, with_changes
from app.voice_edit import VoiceEdit
from engine.atomic import OutputWriteError
from engine.events import Metrics
from ui.bridge import EngineBridge
from ui.caption_window import CaptionWindow
from ui.main_window import EngineChoice, MainWindow

__all__ = ["Controller", "LaunchOptions"]

log = logging.getLogger(__name__)

QUIT_WAIT_S = 10.0


class Controller(QObject):
    def __init__(self, settings: Settings, options: LaunchOptions | None = None,
                 engine_factory: EngineFactory = make_engine,
                 parent: QObject | None = None,
                 runner_factory: RunnerFactory | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.options = options = options or LaunchOptions()
        self.session = Session()
        self.text = TextWorker(self)  # rules, commands, joining: off the GUI thread
        self.bridge = EngineBridge(self)
        self.window = w = MainWindow()
        self.captions = CaptionWindow(settings.caption_lines, settings.caption_font_pt)
        self.captions.apply_style(caption_style(settings))
        self.injector = checked(TextInjector(settings.inject_mode, settings.paste_keys, self))
        current = self.current_settings
        self.live = LiveSession(current, self.update_settings, options, engine_factory,
                                self.bridge.sink, w, self.captions, self)
        self.language_shown = self.live.language_shown
        self.imports = ImportFlow(self.live, current, w, self.session, runner_factory,
                                  parent=self)  # File > Open file…
        self.live.refuse_live = self.imports.refuse_live
        self.dictation = Dictation(current, self.live, w, self.injector, self.bridge,
                                   lambda: self.polisher.prepare(), parent=self)
        self.talking_changed = self.dictation.talking_changed
        self.desktop = DesktopRoutes(current, w, self.injector, self.on_ptt, self)
        self.hotkeys = Hotkeys(current, w.show_message, self.desktop,
                               self.dictation.start_hotkey,
                               options.enable_hotkey and options.input_path is None, self)
        self.polisher = Polisher(self.polish_config, parent=self)  # AI polish (app.polish)
        self.voice_edit = VoiceEdit(current, w, self.injector, self.polisher, self.on_ptt, self)
        self.route = FinalRoute(current, self.live, self.text, self.dictation, self.polisher,
                                self.voice_edit, self.injector, self.session, w, self.captions,
                                self)
        self._captions_placed = False
        self._dropped_reported = 0
        self._connect()

    def _connect(self) -> None:
        b, w, live, route = self.bridge, self.window, self.live, self.route
        b.state_changed.connect(self._on_state)
        b.partial_text.connect(route.on_partial)
        b.final_text.connect(route.on_final)
        self.text.done.connect(route.on_dictated)
        b.translation.connect(route.on_translation)
        b.level_changed.connect(lambda rms, _peak, _end: w.set_level(rms))
        b.metrics.connect(self._on_metrics)
        b.failed.connect(self._on_failed)
        w.start_requested.connect(self.start_engine)
        w.stop_requested.connect(self.stop_engine)
        w.engine_choice_changed.connect(self._on_choice)
        w.copy_all_requested.connect(self.copy_all)
        w.copy_selection_requested.connect(self.copy_selection)
        w.captions_toggled.connect(self.set_captions_visible)
        w.hint_dismissed.connect(lambda: self.update_settings(first_run_hint=False))
        w.quit_requested.connect(self.quit)
        self.injector.finished.connect(route.on_injected)
        live.engine_created.connect(self.dictation.engine_created)
        self.hotkeys.action.connect(self.on_ptt)
        self.hotkeys.language_tapped.connect(lambda _action: live.cycle_language())
        self.hotkeys.edit_action.connect(self.voice_edit.on_command)

    def show(self) -> None:
        s = self.settings
        self.window.set_choice(EngineChoice(s.backend, s.remote_url, self.live.model_name(),
                                            s.device, s.language))
        self.live.show_language()
        self.live.show_models()
        self.window.show()
        if s.first_run_hint:
            self.window.show_hint(s.hotkey.replace("<", "").replace(">", "").title())
        if s.captions_visible:
            self.window.captions_action.setChecked(True)

    def current_settings(self) -> Settings:
        return self.settings

    def polish_config(self) -> ServerConfig:
        s = self.settings
        return ServerConfig(s.polish_url, s.polish_model, s.polish_budget_s)

    # -- what the tray, the control socket and tests drive -------------------------------------
    @property
    def engine(self) -> RunningEngine | None:
        return self.live.engine

    @property
    def state(self) -> str:
        return self.live.state

    @property
    def talking(self) -> bool:
        return self.live.talking

    @property
    def last_injection(self) -> tuple[bool, str] | None:
        return self.route.last_injection

    @Slot()
    def start_engine(self) -> None:
        self.live.start()

    @Slot()
    def stop_engine(self) -> None:
        self.live.stop()

    def start_hotkey(self) -> None:
        self.hotkeys.start()

    def _on_state(self, state: str, detail: str) -> None:
        self.live.on_state(state, detail)
        if state == "stopped" and self.options.exit_after_input and not self.imports.running:
            self.quit()  # (an import pauses the engine: that stop is not the input's end)

    # -- push-to-talk (app.dictation) ---------------------------------------------------------
    @Slot(str)
    def on_ptt(self, action: str) -> None:
        self.dictation.on_ptt(action)

    def control_command(self, command: str) -> str:
        """Handler for app.control: returns the reply line."""
        if command == "status":
            return f"ok {self.state} talking={int(self.talking)}"
        if command == "copy":
            self.copy_all()
            return "ok copied"
        if command == "paste-last":
            return self.dictation.paste_last()
        if command.startswith("captions "):
            direction = command.split()[1]
            {"older": self.captions.scroll_older, "newer": self.captions.scroll_newer,
             "live": self.captions.scroll_to_live}[direction]()
            return f"ok captions {self.captions.scrolled_back} back"
        if command.startswith("edit "):
            return self.voice_edit.on_command(command.split()[1])
        self.on_ptt("toggle" if command == "toggle" else command.split()[1])
        return f"ok talking={int(self.talking)}"

    # -- engine events -------------------------------------------------------------------------
    def _on_metrics(self, metrics: Metrics) -> None:
        self.window.latency.add_metrics(metrics)
        if metrics.dropped_frames > self._dropped_reported:
            # The capture queue overflowed: the machine is too busy to keep up with the mic.
            self._dropped_reported = metrics.dropped_frames
            log.warning("audio frames dropped so far: %d (the computer is too busy)",
                        metrics.dropped_frames)
            self.window.show_message(
                "Some audio was dropped: the computer is too busy to keep up", 10000)

    def _on_failed(self, message: str, recoverable: bool) -> None:
        self.window.show_message(message, 20000)
        if not recoverable:
            self.live.on_failed(recoverable)
            self.window.set_state("failed", message)
            if self.options.exit_after_input:
                QApplication.exit(1)

    # -- export and settings -------------------------------------------------------------------
    @Slot()
    def copy_all(self) -> None:
        copy_to_clipboard(self.session.text())
        log.info("transcript copied to the clipboard (%d utterances)", len(self.session.finals))
        self.window.show_message("Transcript copied to the clipboard", 3000)

    @Slot()
    def copy_selection(self) -> None:
        copy_to_clipboard(self.window.transcript.selected_text() or self.session.text())

    def set_caption_source(self, source: str, app: str = "") -> None:
        """Captions listen to ``source`` ("mic", "system", "app" with ``app``, "both") from
        now on: saved, and a running caption engine restarted on it."""
        try:
            self.update_settings(caption_source=source,
                                 caption_app=app or self.settings.caption_app)
        except ValueError as exc:
            self.window.show_message(str(exc), 10000)
            return
        if self.engine is not None and self.live.config().mode == "vad":
            self.live.restart()

    def set_captions_visible(self, visible: bool) -> None:
        if visible and not self._captions_placed:
            self.captions.dock()
            self._captions_placed = True
        self.captions.setVisible(visible)
        if visible != self.settings.captions_visible:
            self.settings = with_changes(self.settings, captions_visible=visible)

    def _on_choice(self, choice: EngineChoice) -> None:
        s = self.settings
        if (s.backend, s.remote_url, s.model, s.device) == (
                choice.backend, choice.remote_url, choice.model, choice.device):
            self.live.set_language(choice.language)  # no reload
            return
        try:
            self.update_settings(backend=choice.backend, remote_url=choice.remote_url,
                                 model=choice.model, device=choice.device,
                                 language=choice.language)
        except ValueError as exc:
            self.window.show_message(str(exc), 10000)
            return
        if self.engine is not None:  # the engine is rebuilt with the new choice
            self.live.restart()

    def apply_settings(self, new: Settings) -> None:
        """Adopt settings from the dialog: save, then restart what they affect."""
        old = self.settings
        self.update_settings(**{f: getattr(new, f) for f in new.__dataclass_fields__})
        self.captions.apply_style(caption_style(new))
        self.window.set_choice(EngineChoice(new.backend, new.remote_url, self.live.model_name(),
                                            new.device, new.language))
        self.hotkeys.apply(old, new)
        self.polisher.close()  # the server, model or its API key may have changed
        self.live.show_language()
        self.live.show_models()
        if self.live.apply_engine(old, new):
            return  # rebuilt with everything new
        if self.engine is not None and old.vocabulary != new.vocabulary:
            self.dictation.send_vocabulary(self.live.vocabulary_terms())  # no reload
        self.live.apply_language(old, new)

    def update_settings(self, **changes: object) -> None:
        """Apply and save (the first save is what creates the config file)."""
        self.settings = with_changes(self.settings, **changes)
        self.injector.configure(self.settings.inject_mode, self.settings.paste_keys)
        try:
            save_settings(self.settings)
        except (OSError, OutputWriteError) as exc:
            self.window.show_message(f"Could not save settings: {exc}", 10000)

    def abort_engines(self) -> None:
        """A second Ctrl+C while quitting: the engines stop at once; what they delivered
        before is kept."""
        self.live.abort()

    @Slot()
    def quit(self) -> None:
        self.text.drain()  # finals still in the text pipeline are shown and kept first
        self.hotkeys.stop()
        self.route.close()
        self.polisher.close()
        self.dictation.shutdown()
        self.injector.close()
        self.imports.shutdown()
        self.live.stop()
        self.captions.close()
        self.window.quit_on_close = False
        self.window.close()
        self.live.wait_stopped(QUIT_WAIT_S)
        QApplication.quit()
