"""Wiring: engine <-> UI <-> hotkeys/control socket <-> text injection <-> export; File > Open
file… is delegated to app.import_flow (which pauses live listening while it runs).

The controller owns the session: it creates the live engine from the settings (through an
injectable factory, so tests can hand in a fake), routes engine events from the bridge to the
windows, turns hotkey presses into utterances, and sends each dictated final into the focused
app. Everything here runs on the GUI thread; the engine and the hotkey listener call in through
queued signals, and each final's text pipeline (replacement rules, spoken commands) runs on the
text worker's thread (`app.dictation_text.TextWorker`) and comes back the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtWidgets import QApplication

from app.caption_wiring import caption_config, caption_line, caption_style
from app.desktop_routes import DesktopRoutes
from app.dictation import Dictation
from app.dictation_text import Dictated, TextWorker, shown_final
from app.engine_factory import EngineConfig, EngineFactory, make_engine
from app.hotkeys import GlobalHotkey, HotkeyUnavailableError
from app.import_flow import ImportFlow, RunnerFactory
from app.import_host import ImportHost, engine_finished
from app.inject import TextInjector, copy_to_clipboard
from app.latency_trace import breakdown, describe
from app.polish import Outcome, Polisher, ServerConfig
from app.profiles import DictationTarget
from app.session import Session
from app.settings import ENGINE_FIELDS, Settings, save_settings, with_changes
from app.voice_edit import VoiceEdit
from engine.atomic import OutputWriteError
from engine.core.sanitize import clean
from engine.dictation import Insertion
from engine.events import (
    Event,
    EventSink,
    FinalText,
    LiveEngine,
    Metrics,
    PartialText,
    Translation,
)
from engine.journal import Journal, JournalError
from engine.languages import LANGUAGES, language_name, next_language, parse_languages
from engine.model_catalog import installed, is_english_only
from engine.vocabulary import parse as parse_vocabulary
from ui.bridge import EngineBridge
from ui.caption_window import CaptionWindow
from ui.main_window import EngineChoice, MainWindow
from ui.qt_compat import emit, forwarder

log = logging.getLogger(__name__)

QUIT_WAIT_S = 10.0


@dataclass(frozen=True)
class LaunchOptions:
    """Command-line overrides: --input FILE plays a file as the microphone (captions mode),
    --exit-after-input quits after its last final text, --model overrides the settings."""

    input_path: Path | None = None
    exit_after_input: bool = False
    model: str | None = None
    enable_hotkey: bool = True


class Controller(ImportHost):
    talking_changed = Signal(bool)
    _hotkey_action = Signal(str)  # from the pynput thread, delivered queued
    language_shown = Signal(str, bool)  # the current language in words; whether it can cycle
    _language_tapped = Signal(str)  # the language hotkey (pynput thread), delivered queued
    _edit_action = Signal(str)  # the command (voice edit) hotkey, likewise

    def __init__(self, settings: Settings, options: LaunchOptions | None = None,
                 engine_factory: EngineFactory = make_engine,
                 parent: QObject | None = None,
                 runner_factory: RunnerFactory | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.options = options or LaunchOptions()
        self._engine_factory = engine_factory
        self.engine: LiveEngine | None = None
        self.state = "stopped"
        self.talking = False
        self._hotkey: GlobalHotkey | None = None
        self._language_hotkey: GlobalHotkey | None = None
        self._edit_hotkey: GlobalHotkey | None = None
        self._polish_journal: Journal | None = None  # polish lines beside the engine's journal
        self._injection_note = ""  # said with the next insertion's message (a skipped polish)
        self.session = Session()
        self.text = TextWorker(self)  # rules, commands, joining: off the GUI thread
        self.bridge = EngineBridge(self)
        self.window = MainWindow()
        self.captions = CaptionWindow(settings.caption_lines, settings.caption_font_pt)
        self.captions.apply_style(caption_style(settings))
        self.injector = TextInjector(settings.inject_mode, settings.paste_keys, self)
        self.last_injection: tuple[bool, str] | None = None
        self._released_at: float | None = None  # the last push-to-talk release (monotonic)
        self._stages: list[tuple[str, float]] = []  # the last final's steps (app.latency_trace)
        self._captions_placed = False
        self._partial_logged = -1
        self._dropped_reported = 0
        self._generation = 0  # which engine instance is current (see _engine_sink)
        self._stopping: list[LiveEngine] = []  # stopped engines whose threads may still run
        self.imports = ImportFlow(self, runner_factory)  # File > Open file…
        self._connect()
        self.dictation = Dictation(self)  # paste-last, cues, hands-free, per-app profiles
        self.desktop = DesktopRoutes(self, self)  # Wayland/X11 hotkey and insertion routes
        self.polisher = Polisher(self.polish_config, parent=self)  # AI polish (app.polish)
        self.voice_edit = VoiceEdit(self, self)  # voice edits of a selection
        self._edit_action.connect(self.voice_edit.on_command)

    # -- setup ---------------------------------------------------------------------------------
    def _connect(self) -> None:
        b, w = self.bridge, self.window
        b.state_changed.connect(self._on_state)
        b.partial_text.connect(self._on_partial)
        b.final_text.connect(self._on_final)
        self.text.done.connect(self._on_dictated)
        b.translation.connect(self._on_translation)
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
        self.injector.finished.connect(self._on_injected)
        self._hotkey_action.connect(self.on_ptt)
        self._language_tapped.connect(lambda _action: self.cycle_language())

    def show(self) -> None:
        s = self.settings
        self.window.set_choice(EngineChoice(s.backend, s.remote_url, self.model_name(),
                                            s.device, s.language))
        self.show_language()
        self.show_models()
        self.window.show()
        if s.first_run_hint:
            self.window.show_hint(s.hotkey.replace("<", "").replace(">", "").title())
        if s.captions_visible:
            self.window.captions_action.setChecked(True)

    def model_name(self) -> str:
        return self.options.model or self.settings.model

    def start_hotkey(self) -> None:
        if not self.options.enable_hotkey or self.options.input_path is not None:
            return
        if self.desktop.start_hotkey():
            return  # Wayland: the portal's shortcut or the compositor's binding
        self._hotkey = GlobalHotkey(self.settings.hotkey, self.settings.hotkey_mode,
                                    forwarder(self._hotkey_action, 1))
        try:
            note = self._hotkey.start()
            if note:
                self.window.show_message(note, 20000)
        except HotkeyUnavailableError as exc:
            self._hotkey = None
            self.window.show_message(f"Global hotkey off: {exc}", 20000)
            log.warning("global hotkey unavailable: %s", exc)
            return
        self.dictation.start_hotkey()
        self.start_language_hotkey()
        self.start_edit_hotkey()

    def start_language_hotkey(self) -> None:
        """The chord that cycles the language (none when the setting is "")."""
        if self._language_hotkey is not None:
            self._language_hotkey.stop()
            self._language_hotkey = None
        if not self.settings.language_hotkey:
            return
        hotkey = GlobalHotkey(self.settings.language_hotkey, "tap",
                              forwarder(self._language_tapped, 1))
        try:
            hotkey.start()
        except HotkeyUnavailableError as exc:
            log.warning("language hotkey unavailable: %s", exc)
            self.window.show_message(f"Language hotkey off: {exc}", 20000)
            return
        self._language_hotkey = hotkey

    def start_edit_hotkey(self) -> None:
        """Listen for the voice-edit chord while AI polish is on (and the chord is set)."""
        if self._edit_hotkey is not None:
            self._edit_hotkey.stop()
            self._edit_hotkey = None
        s = self.settings
        if not (s.polish and s.command_hotkey) or not self.options.enable_hotkey:
            return
        hotkey = GlobalHotkey(s.command_hotkey, "hold", forwarder(self._edit_action, 1))
        try:
            hotkey.start()
        except HotkeyUnavailableError as exc:
            log.warning("voice-edit hotkey unavailable: %s", exc)
            self.window.show_message(f"Voice-edit hotkey off: {exc}", 20000)
            return
        self._edit_hotkey = hotkey

    def polish_config(self) -> ServerConfig:
        s = self.settings
        return ServerConfig(s.polish_url, s.polish_model, s.polish_budget_s)

    # -- engine lifecycle ----------------------------------------------------------------------
    def engine_config(self) -> EngineConfig:
        s = self.settings
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

    def spoken_languages(self) -> tuple[str, ...]:
        return parse_languages(self.settings.languages)

    def english_only(self) -> bool:
        return self.settings.backend == "local" and is_english_only(self.model_name())

    @Slot()
    def cycle_language(self) -> None:
        """The language hotkey and tray entry: auto-detect -> each spoken language -> ..."""
        if self.english_only():
            self.window.show_message(f"{self.model_name()} is an English-only model", 5000)
            return
        self.set_language(next_language(self.settings.language, self.spoken_languages()))

    def set_language(self, code: str) -> None:
        """Decode in ``code`` ("": auto-detect among the spoken languages) from now on: the
        running engine switches without a reload where it can."""
        old = self.settings.language
        self.update_settings(language=code)
        self.show_language()
        if self.engine is None or old == code:
            return
        if not self._live_change("set_language", code or None, self.spoken_languages()):
            self.stop_engine()  # (remote: the language goes with the connection)
            self.start_engine()
        self.window.show_message(f"Language: {self.language_label()}", 3000)

    def set_input_device(self, name: str) -> None:
        """Record from microphone ``name`` ("": the system default): remembered by name, and
        the running engine switches without a reload (engine.audio.sources.prefer)."""
        if self.settings.input_device != name:
            self.update_settings(input_device=name)
        if self.engine is not None and not self._live_change("set_input_device", name):
            self.stop_engine()
            self.start_engine()

    def show_models(self) -> None:
        """The main window's model list: what is here now (Settings > Models downloads more)."""
        folders = [line for line in self.settings.model_dirs.splitlines() if line.strip()]
        self.window.set_models([m.name for m in installed(folders)])

    def _live_change(self, method: str, *args: object) -> bool:
        """Apply a change to the running engine where it can take it without a rebuild
        (app.engine_factory.AppEngine); False where it cannot."""
        change = getattr(self.engine, method, None)
        return bool(change(*args)) if change is not None else False

    def language_label(self) -> str:
        if self.english_only():
            return "English (English-only model)"
        code = self.settings.language
        if code:
            return language_name(code)
        spoken = self.spoken_languages()
        return "Auto-detect" + (f" ({', '.join(language_name(c) for c in spoken)})"
                                if spoken else "")

    def show_language(self) -> None:
        """The current language in the main window's selector and the caption window."""
        spoken = self.spoken_languages()
        self.window.set_languages([(c, language_name(c)) for c in spoken or LANGUAGES],
                                  self.settings.language, self.english_only())
        code = "en" if self.english_only() else self.settings.language
        self.captions.set_language_tag(code.upper() if code else "AUTO",
                                       self.language_label())
        emit(self.language_shown, self.language_label(), not self.english_only())

    def vocabulary_terms(self, sets: tuple[str, ...] = ()) -> tuple[str, ...]:
        """The settings' default vocabulary set plus the named ``sets``."""
        return parse_vocabulary(self.settings.vocabulary).terms(sets)

    @Slot()
    def start_engine(self) -> None:
        if self.engine is not None or self.imports.refuse_live():
            return
        self.latency_reset()
        self.window.set_state("loading", self.model_name())
        self._generation += 1
        try:
            config = self.engine_config()
            self.engine = self._engine_factory(config, self._engine_sink(self._generation))
            self.dictation.engine_created(self.engine, config.vocabulary)
            self.engine.start()
        except Exception as exc:  # noqa: BLE001 - any setup failure is shown, not raised
            log.exception("engine failed to start")
            self.engine = None
            self.window.set_state("failed", str(exc))
            self.window.show_message(f"Could not start: {exc}", 20000)

    def _engine_sink(self, generation: int) -> EventSink:
        """The sink for one engine instance. After a restart (new model, say) the old engine is
        still flushing: its final text is kept, but its lifecycle events ("stopped") must not
        overwrite the new engine's state. Called on engine threads; reads one int."""
        def sink(event: Event) -> None:
            if generation == self._generation or isinstance(event, FinalText):
                self.bridge.sink(event)
        return sink

    @Slot()
    def stop_engine(self) -> None:
        engine, self.engine = self.engine, None
        self.talking = False
        if engine is not None:
            engine.stop()  # flushes the utterance in flight; its final still arrives
            # Keep it until its threads end (see quit); drop those already done, so a session
            # with many restarts doesn't keep old models in memory.
            self._stopping = [e for e in self._stopping if not engine_finished(e)] + [engine]

    def stopped_engines(self) -> list[LiveEngine]:
        """Stopped engines that may still be flushing (a copy, safe to hand to a thread)."""
        return list(self._stopping)

    def latency_reset(self) -> None:
        self.window.latency.reset()

    def _on_state(self, state: str, detail: str) -> None:
        log.info("engine state %s %s", state, detail)
        self.state = state
        self.window.set_state(state, detail)
        info = getattr(self.engine, "model_info", None)
        if state == "ready" and info is not None:
            self.window.set_model_info(info.name, info.device, info.compute_type)
        elif state == "ready" and self.settings.backend == "remote":
            # The server decides model and device; show what it announced.
            self.window.model_label.setText(f"remote · {detail or self.settings.remote_url}")
        if state == "stopped" and self.options.exit_after_input and not self.imports.running:
            self.quit()  # (an import pauses the engine: that stop is not the input's end)

    # -- push-to-talk --------------------------------------------------------------------------
    @Slot(str)
    def on_ptt(self, action: str) -> None:
        """"press"/"release" from the hotkey or the control socket; "toggle" flips (a recording
        started by a toggle is hands-free: it stops itself after a silence)."""
        hands_free = action == "toggle" or self.settings.hotkey_mode == "toggle"
        if action == "toggle":
            action = "release" if self.talking else "press"
        if action == "press" and self.imports.refuse_live():
            return
        if action == "press" and self.engine is not None and self.state == "loading":
            # A model (re)load: the press would only be heard once it is done. Say so rather
            # than record into a queue the user cannot see (the utterance before the switch
            # was flushed by the old engine and is not lost).
            self.window.show_message(f"Loading {self.model_name()}: dictation is off until it "
                                     "is ready (a few seconds)", 5000)
            log.info("push-to-talk refused while the model loads")
            return
        if self.engine is None:
            self.start_engine()
        if self.engine is None:
            return
        if action == "press" and not self.talking:
            self.talking = True
            if self.settings.polish:
                self.polisher.prepare()  # key and connection ready before the final
            self.dictation.on_press(hands_free)
            self.dictation.pressed_at(self.engine.begin_utterance())
        elif action == "release" and self.talking:
            self.talking = False
            self._released_at = time.monotonic()
            self.engine.end_utterance()
            self.dictation.on_release()
        log.info("push-to-talk %s: talking=%s", action, self.talking)
        emit(self.talking_changed, self.talking)

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
    def _on_partial(self, event: PartialText) -> None:
        # A model's text reaches the log and the screen as text alone (engine.core.sanitize).
        event = replace(event, committed=clean(event.committed), tentative=clean(event.tentative))
        if event.utterance_id != self._partial_logged:
            self._partial_logged = event.utterance_id  # once per utterance: logs stay readable
            log.info("partial text for utterance %d: %s | %s", event.utterance_id,
                     event.committed, event.tentative)
        label = f"{event.source}: " if event.source else ""
        self.window.transcript.show_partial(event.start, label + event.committed, event.tentative)
        self.captions.show_partial(event.committed, event.tentative, event.source)

    def _on_final(self, event: FinalText) -> None:
        received = time.monotonic()
        event = replace(event, text=clean(event.text))
        log.info("final %d (round trip %.0f ms, %.0f ms after speech end): %s",
                 event.utterance_id, event.latency_ms, event.after_speech_end_ms, event.text)
        released = [("release", self._released_at)] if self._released_at is not None else []
        self._released_at = None
        if self.voice_edit.take(event.text):
            self._stages = [*released, *event.stages, ("received", received)]
            return  # the spoken instruction of a voice edit (app.voice_edit)
        # In push-to-talk mode every final was dictated on purpose and goes into the focused
        # app, as that app's profile says (app.dictation); in captions mode text only shows
        # on screen (replacement rules, no commands). The text pipeline runs on the text
        # worker's thread; `_on_dictated` takes it from there.
        target = self.dictation.target() if self.engine_config().mode == "ptt" else None
        self.text.submit(event, self.settings, target,
                         [*released, *event.stages, ("received", received)])

    def _on_dictated(self, done: Dictated) -> None:
        self._stages = [*done.stages, ("dictated", time.monotonic())]
        for problem in done.out.problems:  # a replacement rule skipped: the user's to fix
            log.warning("%s", problem)
            self.window.show_message(problem, 20000)
        event, out, target = done.final, done.out, done.target
        self._show_final(event, out)
        if target is None:
            pass  # captions mode: shown, nothing inserted
        elif target.polish != "off" and out.text.strip() and out.delete_chars == 0:
            stages, self._stages = self._stages, []
            self.polisher.polish(
                out.text.strip(), target.polish, self.settings.polish_custom,
                lambda outcome: self._insert_polished(event, out, target, outcome, stages))
            return  # inserted when the answer is in, or the budget is spent
        elif self.dictation.insert(out, target):
            return  # the breakdown is shown when the insertion is done
        self._show_breakdown()

    def _insert_polished(self, event: FinalText, out: Insertion, target: DictationTarget,
                         outcome: Outcome, stages: list[tuple[str, float]]) -> None:
        """A final's AI polish is done (answered and checked, rejected, failed or out of time):
        insert its outcome, with the joining whitespace the text pipeline gave the raw text."""
        text = out.text
        if outcome.ok:
            lead = text[:len(text) - len(text.lstrip())]
            text = lead + outcome.text + text[len(text.rstrip()):]
        else:  # the user sees why, with the insertion's own message (_on_injected)
            self._injection_note = outcome.describe()
            self.window.show_message(self._injection_note, 10000)
        self.window.latency.set_polish(outcome.llm_ms, outcome.reason, outcome.describe())
        self._journal_polish(event.utterance_id, out.text.strip(), outcome)
        self.session.set_stages(event.utterance_id, (*event.stages, *outcome.stages))
        self._stages = [*stages, *outcome.stages]
        if not self.dictation.insert(Insertion(text, out.delete_chars, out.shown, out.unshown),
                                     target):
            self._show_breakdown()

    def _journal_polish(self, utterance_id: int, raw: str, outcome: Outcome) -> None:
        """History keeps both texts: a polish line beside the engine's line for the final."""
        path = getattr(self.engine, "journal_path", None)
        if not path:
            return
        where = Path(path)
        if self._polish_journal is None or self._polish_journal.path != where:
            self._polish_journal = Journal(where.stem, where.parent)
        try:
            self._polish_journal.append_polish(
                utterance_id, raw, outcome.text if outcome.ok else None,
                "" if outcome.ok else f"{outcome.reason}: {outcome.detail}")
        except JournalError as exc:
            log.warning("%s", exc)

    def _show_final(self, event: FinalText, out: Insertion) -> None:
        for text in out.unshown:  # "scratch that"
            if self.session.finals and self.session.finals[-1].text == text:
                self.session.remove_last()
                self.window.transcript.remove_last()
        self.session.add(shown_final(event, out))
        label = f"{event.source}: " if event.source and out.shown else ""
        self.window.transcript.add_final(event.start, label + out.shown)
        # Captions may amend their last line when the next goes on with its sentence; dictated
        # lines stay as they were typed.
        captions = self.engine_config().mode == "vad"
        self.captions.add_final(caption_line(event, out.shown) if captions else out.shown)

    def _on_translation(self, event: Translation) -> None:
        self.captions.add_translation(f"{event.source}#{event.utterance_id}", event.text)

    def _show_breakdown(self, extra: Sequence[tuple[str, float]] = ()) -> None:
        stages = [*self._stages, *extra]
        if not stages:
            return
        origin = stages[0][0]  # the key release, or the end of speech
        rows = breakdown(stages, origin)
        log.info("latency breakdown from %s at %.6f: %s", origin, stages[0][1], describe(rows))
        self.window.latency.set_breakdown(origin, rows)
        self._stages = []

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
            self.engine = None
            self.window.set_state("failed", message)
            if self.options.exit_after_input:
                QApplication.exit(1)

    def _on_injected(self, ok: bool, message: str) -> None:
        self.last_injection = (ok, message)
        note, self._injection_note = self._injection_note, ""
        if note:
            message = f"{message} · {note}"
        (log.info if ok else log.warning)("%s", message)
        self.window.show_message(message, 3000 if ok and not note else 20000)
        self._show_breakdown(self.injector.timings)

    # -- export and settings -------------------------------------------------------------------
    @Slot()
    def copy_all(self) -> None:
        copy_to_clipboard(self.session.text())
        log.info("transcript copied to the clipboard (%d utterances)", len(self.session.finals))
        self.window.show_message("Transcript copied to the clipboard", 3000)

    @Slot()
    def copy_selection(self) -> None:
        text = self.window.transcript.selected_text() or self.session.text()
        copy_to_clipboard(text)

    def set_caption_source(self, source: str, app: str = "") -> None:
        """Captions listen to ``source`` ("mic", "system", "app" with ``app``, "both") from
        now on: saved, and a running caption engine restarted on it."""
        try:
            self.update_settings(caption_source=source,
                                 caption_app=app or self.settings.caption_app)
        except ValueError as exc:
            self.window.show_message(str(exc), 10000)
            return
        if self.engine is not None and self.engine_config().mode == "vad":
            self.stop_engine()
            self.start_engine()

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
            self.set_language(choice.language)  # no reload
            return
        try:
            self.update_settings(backend=choice.backend, remote_url=choice.remote_url,
                                 model=choice.model, device=choice.device,
                                 language=choice.language)
        except ValueError as exc:
            self.window.show_message(str(exc), 10000)
            return
        if self.engine is not None:  # the engine is rebuilt with the new choice
            self.stop_engine()
            self.start_engine()

    def apply_settings(self, new: Settings) -> None:
        """Adopt settings from the dialog: save, then restart what they affect."""
        old = self.settings
        self.update_settings(**{f: getattr(new, f) for f in new.__dataclass_fields__})
        self.captions.apply_style(caption_style(new))
        self.window.set_choice(EngineChoice(new.backend, new.remote_url, self.model_name(),
                                            new.device, new.language))
        if (old.hotkey, old.hotkey_mode) != (new.hotkey, new.hotkey_mode) and self._hotkey:
            self._hotkey.stop()
            self.start_hotkey()
        elif old.paste_last_hotkey != new.paste_last_hotkey and self._hotkey:
            self.dictation.start_hotkey()
        if (old.polish, old.command_hotkey) != (new.polish, new.command_hotkey) and self._hotkey:
            self.start_edit_hotkey()
        self.polisher.close()  # the server, model or its API key may have changed
        if self.desktop.portal_hotkey is not None:
            self.desktop.portal_hotkey.machine.mode = new.hotkey_mode
            if old.hotkey != new.hotkey:  # the desktop owns the keys: open its dialog
                self.desktop.portal_hotkey.configure()
        if old.language_hotkey != new.language_hotkey and self._hotkey:
            self.start_language_hotkey()
        self.show_language()
        self.show_models()
        changed = {f for f in ENGINE_FIELDS if getattr(old, f) != getattr(new, f)}
        if self.engine is not None and changed and not (
                changed <= {"model", "device"} and new.backend == "local"
                and self._live_change("switch_model", self.model_name(), new.device)):
            self.stop_engine()  # (a new model alone reloads in the running engine)
            self.start_engine()
            return
        if self.engine is not None and old.input_device != new.input_device:
            self.set_input_device(new.input_device)
        if self.engine is not None and old.vocabulary != new.vocabulary:
            self.dictation.send_vocabulary(self.vocabulary_terms())  # no reload
        language_changed = (old.language, old.languages) != (new.language, new.languages)
        if self.engine is not None and language_changed and not self._live_change(
                "set_language", new.language or None, self.spoken_languages()):
            self.stop_engine()
            self.start_engine()

    def update_settings(self, **changes: object) -> None:
        """Apply and save (the first save is what creates the config file)."""
        self.settings = with_changes(self.settings, **changes)
        self.injector.configure(self.settings.inject_mode, self.settings.paste_keys)
        try:
            save_settings(self.settings)
        except (OSError, OutputWriteError) as exc:
            self.window.show_message(f"Could not save settings: {exc}", 10000)

    def abort_engines(self) -> None:
        """A second Ctrl+C while quitting: the engines stop at once (no utterance flushed, no
        server's last final awaited); what they delivered before is kept."""
        for engine in [self.engine, *self._stopping]:
            inner = getattr(engine, "engine", engine)
            abort = getattr(inner, "abort", None)
            if abort is not None:
                abort()

    @Slot()
    def quit(self) -> None:
        self.text.drain()  # finals still in the text pipeline are shown and kept first
        for hotkey in (self._hotkey, self._language_hotkey):
            if hotkey is not None:
                hotkey.stop()
        self.desktop.stop()
        if self._edit_hotkey is not None:
            self._edit_hotkey.stop()
        if self._polish_journal is not None:
            self._polish_journal.close()
        self.polisher.close()
        self.dictation.shutdown()
        self.injector.close()
        self.imports.shutdown()
        self.stop_engine()
        self.captions.close()
        self.window.quit_on_close = False
        self.window.close()
        for engine in self._stopping:
            # Let the engine's threads finish their flush: native libraries abort the process
            # if the interpreter shuts down under a running decode.
            if not engine_finished(engine, QUIT_WAIT_S):
                log.warning("engine still busy after %.0f s; quitting anyway", QUIT_WAIT_S)
        self._stopping.clear()
        QApplication.quit()
