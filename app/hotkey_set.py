"""The app's global hotkeys (GUI thread): push-to-talk (or the Wayland desktop's route for it),
the language chord, the voice-edit chord, and the paste-last chord that `app.dictation` owns.
Each listens on pynput's thread and is delivered here through a queued signal; each is
(re)started the same way, by `listen_chord`, when the settings change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from app.desktop_routes import DesktopRoutes
from app.hotkeys import GlobalHotkey, HotkeyUnavailableError
from app.settings import Settings
from ui.qt_compat import forwarder

log = logging.getLogger(__name__)

ShowMessage = Callable[[str, int], None]


def listen_chord(chord: str, mode: str, signal: object, what: str, show: ShowMessage,
                 *, show_note: bool = False) -> GlobalHotkey | None:
    """Listen for ``chord`` in ``mode``, each action emitted on ``signal``; None when the chord
    is "" or cannot be grabbed (the user is told which, by ``what`` it is for)."""
    if not chord:
        return None
    hotkey = GlobalHotkey(chord, mode, forwarder(signal, 1))
    try:
        note = hotkey.start()
    except HotkeyUnavailableError as exc:
        log.warning("%s hotkey unavailable: %s", what, exc)
        show(f"{what[0].upper()}{what[1:]} hotkey off: {exc}", 20000)
        return None
    if note and show_note:
        show(note, 20000)
    return hotkey


class Hotkeys(QObject):
    """Push-to-talk, language and voice-edit chords; ``enabled`` False (tests, a file played as
    the microphone) listens for none."""

    action = Signal(str)  # push-to-talk: "press"/"release" (or "tap" in toggle mode)
    language_tapped = Signal(str)
    edit_action = Signal(str)  # the voice-edit chord: "press"/"release"

    def __init__(self, settings: Callable[[], Settings], show: ShowMessage,
                 desktop: DesktopRoutes, paste_last: Callable[[], None], enabled: bool,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._settings, self._show = settings, show
        self.desktop = desktop
        self._paste_last = paste_last  # (re)starts the paste-last chord (app.dictation)
        self.enabled = enabled
        self.ptt: GlobalHotkey | None = None
        self._language: GlobalHotkey | None = None
        self._edit: GlobalHotkey | None = None

    def start(self) -> None:
        if not self.enabled:
            return
        if self.desktop.start_hotkey():
            return  # Wayland: the portal's shortcut or the compositor's binding
        s = self._settings()
        self.ptt = listen_chord(s.hotkey, s.hotkey_mode, self.action, "global", self._show,
                                show_note=True)
        if self.ptt is None:
            return
        self._paste_last()
        self.start_language()
        self.start_edit()

    def start_language(self) -> None:
        """The chord that cycles the language (none when the setting is "")."""
        if self._language is not None:
            self._language.stop()
        self._language = listen_chord(self._settings().language_hotkey, "tap",
                                      self.language_tapped, "language", self._show)

    def start_edit(self) -> None:
        """Listen for the voice-edit chord while AI polish is on (and the chord is set)."""
        if self._edit is not None:
            self._edit.stop()
        s = self._settings()
        self._edit = listen_chord(s.command_hotkey if s.polish and self.enabled else "",
                                  "hold", self.edit_action, "voice-edit", self._show)

    def apply(self, old: Settings, new: Settings) -> None:
        """Restart the chords the new settings change."""
        if (old.hotkey, old.hotkey_mode) != (new.hotkey, new.hotkey_mode) and self.ptt:
            self.ptt.stop()
            self.start()
        elif old.paste_last_hotkey != new.paste_last_hotkey and self.ptt:
            self._paste_last()
        if (old.polish, old.command_hotkey) != (new.polish, new.command_hotkey) and self.ptt:
            self.start_edit()
        portal = self.desktop.portal_hotkey
        if portal is not None:
            portal.machine.mode = new.hotkey_mode
            if old.hotkey != new.hotkey:  # the desktop owns the keys: open its dialog
                portal.configure()
        if old.language_hotkey != new.language_hotkey and self.ptt:
            self.start_language()

    def stop(self) -> None:
        for hotkey in (self.ptt, self._language, self._edit):
            if hotkey is not None:
                hotkey.stop()
        self.desktop.stop()
