"""Push-to-talk and what goes with it: paste-last, start/stop cues, hands-free auto-stop and
per-application profiles. `on_ptt` takes each press and release (hotkeys, the control socket,
the tray); the final's route (`app.final_route`) asks for the target and inserts through
`insert`; everything here runs on the GUI thread.

- Paste last: a second global hotkey (`Settings.paste_last_hotkey`, "" = off; it fires once the
  whole chord is let go, so the paste keys don't mix with the user's Ctrl+Alt), the tray's
  "Paste last text" and the control socket's ``paste-last`` re-insert the last inserted text.
- Cues: a start cue at the press, with the engine muting what the microphone hears of it
  (`mute_input`: from the press until the tone has been played out), and a stop cue once the
  utterance's audio has been cut (its SpeechEnded), so neither is transcribed. Engines that
  cannot mute their input (`RunningEngine.can_mute_input`: remote, captions) get no start cue.
- Hands-free: a recording started in toggle mode stops itself after `auto_stop_s` of silence
  (app.handsfree.AutoStop on the engine's level readings).
- Profiles: the focused window's class is read at the press (its vocabulary set goes to the
  engine, where the engine takes one) and again at insertion (insert mode, style, commands):
  `target()` returns the frozen `DictationTarget` the text pipeline and the injector use.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot

from app.checked_inject import CheckedInjector
from app.handsfree import AutoStop
from app.hotkey_set import listen_chord
from app.hotkeys import GlobalHotkey
from app.live_session import LiveSession
from app.profiles import (
    NO_PROFILE,
    DictationTarget,
    ProfileError,
    dictation_target,
    profile_for,
    vocabulary_terms,
)
from app.settings import Settings
from engine.dictation import Insertion
from ui.bridge import EngineBridge
from ui.main_window import MainWindow
from ui.qt_compat import emit

if TYPE_CHECKING:
    from engine.audio.cues import CuePlayer

log = logging.getLogger(__name__)

WindowClassReader = Callable[[], "tuple[str, ...] | None"]


def _read_window_class() -> tuple[str, ...] | None:
    from app.focus import focused_window_class

    return focused_window_class()


class Dictation(QObject):
    _tapped = Signal(str)  # from the paste-last hotkey's listener thread, delivered queued
    talking_changed = Signal(bool)

    def __init__(self, settings: Callable[[], Settings], live: LiveSession, window: MainWindow,
                 injector: CheckedInjector, bridge: EngineBridge, prepare: Callable[[], None],
                 window_class: WindowClassReader = _read_window_class,
                 clock: Callable[[], float] = time.monotonic,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._settings, self.live, self.window = settings, live, window
        self.injector = injector
        self._prepare = prepare  # AI polish's key and connection, readied at a press
        self.released_at: float | None = None  # the last push-to-talk release (monotonic)
        self.read_window_class = window_class
        self.clock = clock
        self.last_text: str | None = None  # the last text inserted into an app
        self.auto_stop = AutoStop(settings().auto_stop_s)
        self.hands_free = False
        self._cues: CuePlayer | None = None
        self._stop_cue_for: int | None = None  # play the stop cue at this utterance's end
        self._utterance: int | None = None
        self._paste_hotkey: GlobalHotkey | None = None
        self._vocabulary_engine: object = None  # the engine _vocabulary_sent was sent to
        self._vocabulary_sent: tuple[str, ...] | None = None
        self._tapped.connect(lambda _action: self.paste_last())
        b = bridge
        b.level_changed.connect(self.on_level)
        b.speech_started.connect(self.on_speech_started)
        b.speech_ended.connect(self.on_speech_ended)

    # -- paste last ----------------------------------------------------------------------------
    def start_hotkey(self) -> None:
        """Listen for the paste-last chord (nothing when it is "" or hotkeys are off)."""
        self.stop_hotkey()
        self._paste_hotkey = listen_chord(self._settings().paste_last_hotkey, "tap", self._tapped,
                                          "paste-last", self.window.show_message)

    def stop_hotkey(self) -> None:
        if self._paste_hotkey is not None:
            self._paste_hotkey.stop()
            self._paste_hotkey = None

    @Slot()
    def paste_last(self) -> str:
        """Re-insert the last inserted text into the focused app; returns the reply line."""
        if not self.last_text:
            self.window.show_message("Nothing dictated yet to paste again", 5000)
            return "error nothing dictated yet"
        target = self.target()
        if target.insert == "off":
            return "ok nothing inserted (insertion is off for this application)"
        self.injector.insert(self.last_text, 0, target.insert)
        log.info("paste-last: %d characters", len(self.last_text))
        return f"ok pasted {len(self.last_text)} characters"

    # -- profiles ------------------------------------------------------------------------------
    def target(self) -> DictationTarget:
        """The focused application's profile over the global settings (read now)."""
        s = self._settings()
        names = self.read_window_class()
        try:
            profile = profile_for(names, s.app_profiles, s.vocabulary)
        except ProfileError as exc:  # Settings refuse these; be safe with a hand-made one
            log.warning("app profiles: %s", exc)
            profile = NO_PROFILE
        return dictation_target(profile, s.inject_mode, s.text_style, s.spoken_commands,
                                names[-1] if names else None,
                                s.polish_preset if s.polish else "off")

    def insert(self, out: Insertion, target: DictationTarget) -> bool:
        """Insert a dictated final (the text pipeline's `Insertion`: characters to delete
        first, then the text) into the focused app as its profile says; whether an insertion
        started (the injector then reports `finished`)."""
        if target.insert == "off" or (not out.text.strip(" \t") and out.delete_chars <= 0):
            return False  # silence (an empty final) inserts nothing: no empty paste
        if out.text.strip():
            self.last_text = out.text
        self.injector.insert(out.text, out.delete_chars, target.insert)
        return True

    def engine_created(self, engine: object, terms: tuple[str, ...]) -> None:
        """A new engine, made with these vocabulary terms."""
        self._vocabulary_engine, self._vocabulary_sent = engine, terms

    def send_vocabulary(self, terms: tuple[str, ...]) -> None:
        """Give the engine these vocabulary terms, unless it has them already (an engine starts
        with the settings' default set, from its EngineConfig)."""
        engine = self.live.engine
        if engine is None:
            return
        if engine is not self._vocabulary_engine:  # not made by engine_created: unknown
            self._vocabulary_engine, self._vocabulary_sent = engine, None
        if terms != self._vocabulary_sent:
            engine.set_vocabulary(terms)
            self._vocabulary_sent = terms

    # -- press / release -----------------------------------------------------------------------
    @Slot(str)
    def on_ptt(self, action: str) -> None:
        """"press"/"release" from the hotkey or the control socket; "toggle" flips (a recording
        started by a toggle is hands-free: it stops itself after a silence)."""
        live = self.live
        hands_free = action == "toggle" or self._settings().hotkey_mode == "toggle"
        if action == "toggle":
            action = "release" if live.talking else "press"
        if action == "press" and live.refuse_live():
            return
        if action == "press" and live.engine is not None and live.state == "loading":
            # A model (re)load: the press would only be heard once it is done. Say so rather
            # than record into a queue the user cannot see (the utterance before the switch
            # was flushed by the old engine and is not lost).
            self.window.show_message(f"Loading {live.model_name()}: dictation is off until "
                                     "it is ready (a few seconds)", 5000)
            log.info("push-to-talk refused while the model loads")
            return
        if live.engine is None:
            live.start()
        if live.engine is None:
            return
        if action == "press" and not live.talking:
            live.talking = True
            if self._settings().polish:
                self._prepare()
            self.on_press(hands_free)
            self.pressed_at(live.engine.begin_utterance())
        elif action == "release" and live.talking:
            live.talking = False
            self.released_at = time.monotonic()
            live.engine.end_utterance()
            self.on_release()
        log.info("push-to-talk %s: talking=%s", action, live.talking)
        emit(self.talking_changed, live.talking)

    def on_press(self, hands_free: bool) -> None:
        s = self._settings()
        engine = self.live.engine
        target = self.target()
        self.send_vocabulary(vocabulary_terms(s.vocabulary, target.vocabulary))
        self.hands_free = hands_free
        self.auto_stop = AutoStop(s.auto_stop_s if hands_free else 0.0)
        self.auto_stop.start(self.clock())
        self._utterance = None
        if s.sounds and s.sound_volume > 0 and engine is not None and engine.can_mute_input:
            from engine.audio.cues import ECHO_TAIL_S, MUTE_GUARD_S

            # Muted before the tone starts (the microphone must not hear it), then cut down to
            # the time the tone took once it has been played (on the player's thread).
            at = engine.mute_input(MUTE_GUARD_S)

            def played(took: float) -> None:
                engine.mute_input(took + ECHO_TAIL_S, at=at)
            self.cues().play("start", s.sound_volume, played)

    def pressed_at(self, at: int | None) -> None:
        """The stream position the press applied to (None: not known): level readings of the
        audio before it do not count as speech of this recording."""
        self.auto_stop.since = at

    def on_release(self) -> None:
        self.auto_stop.stop()
        self._stop_cue_for = self._utterance if self._utterance is not None else -1

    def cues(self) -> CuePlayer:
        if self._cues is None:
            from engine.audio.cues import CuePlayer

            self._cues = CuePlayer()
        return self._cues

    # -- engine events -------------------------------------------------------------------------
    def on_speech_started(self, utterance_id: int, _at: int) -> None:
        if self.live.talking:
            self._utterance = utterance_id

    def on_speech_ended(self, utterance_id: int, _at: int) -> None:
        """The released utterance's audio is cut: the stop cue can't end up in it now."""
        wanted = self._stop_cue_for
        if wanted is None or wanted not in (-1, utterance_id):
            return
        self._stop_cue_for = None
        s = self._settings()
        if s.sounds and s.sound_volume > 0:
            self.cues().play("stop", s.sound_volume)

    def on_level(self, rms_db: float, _peak_db: float, end: int = -1) -> None:
        if self.auto_stop.level(rms_db, self.clock(), end) and self.live.talking:
            log.info("hands-free: %.1f s of silence, stopping", self.auto_stop.after_s)
            self.on_ptt("release")

    def shutdown(self) -> None:
        self.stop_hotkey()
        if self._cues is not None:
            self._cues.wait(2.0)
