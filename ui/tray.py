"""Tray icon with start/stop, caption window, paste last text, the microphone, the language
(a click cycles it), show window and quit; and icon/stylesheet loading that tolerates a checkout
without resources (the app then just looks plainer)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QActionGroup, QIcon
from PySide6.QtWidgets import QApplication, QMenu, QSystemTrayIcon

from ui.qt_compat import emit, forwarder

log = logging.getLogger(__name__)


def load_icon(*, tray: bool = False, recording: bool = False) -> QIcon:
    try:
        import resources

        icon = QIcon()
        for path in resources.icon_files(tray=tray, recording=recording):
            icon.addFile(str(path))
        return icon
    except (ImportError, AttributeError, OSError, ValueError) as exc:
        log.debug("icon unavailable: %s", exc)
        return QIcon()


def apply_stylesheet(app: QApplication) -> None:
    try:
        import resources

        app.setStyleSheet(resources.stylesheet())
    except (ImportError, AttributeError, OSError) as exc:
        log.debug("stylesheet unavailable: %s", exc)


CAPTION_SOURCES = (("mic", "Microphone"), ("system", "What the computer plays"),
                   ("both", "You and them (microphone + computer)"))


class Tray(QObject):
    """``playing_apps``: called when the caption source menu opens, for the apps to offer."""

    start_stop_requested = Signal()
    captions_toggled = Signal(bool)
    caption_source_chosen = Signal(str, str)  # source ("mic", "system", "app", "both"), app
    show_window_requested = Signal()
    paste_last_requested = Signal()
    microphone_chosen = Signal(str)  # a device name ("": the system default)
    microphones_wanted = Signal()  # the menu is about to open: call set_microphones
    language_cycle_requested = Signal()
    quit_requested = Signal()

    def __init__(self, parent: QObject | None = None,
                 playing_apps: Callable[[], list[str]] = list) -> None:
        super().__init__(parent)
        self._playing_apps = playing_apps
        self._idle_icon = load_icon(tray=True)
        self._recording_icon = load_icon(tray=True, recording=True)
        self.icon = QSystemTrayIcon(self._idle_icon, self)
        self.icon.setToolTip("Sottovoce")
        menu = QMenu()
        self.start_action = QAction("Start", menu)
        self.start_action.triggered.connect(forwarder(self.start_stop_requested, 0))
        self.captions_action = QAction("Caption window", menu)
        self.captions_action.setCheckable(True)
        self.captions_action.toggled.connect(forwarder(self.captions_toggled, 1))
        self.paste_last_action = QAction("Paste last text", menu)
        self.paste_last_action.triggered.connect(forwarder(self.paste_last_requested, 0))
        self.microphone_menu = QMenu("Microphone", menu)
        self.language_action = QAction("Language: Auto-detect", menu)
        self.language_action.setToolTip("Click to switch to the next of your languages")
        self.language_action.triggered.connect(forwarder(self.language_cycle_requested, 0))
        menu.aboutToShow.connect(forwarder(self.microphones_wanted, 0))
        show_action = QAction("Show window", menu)
        show_action.triggered.connect(forwarder(self.show_window_requested, 0))
        quit_action = QAction("Quit", menu)
        quit_action.triggered.connect(forwarder(self.quit_requested, 0))
        self.source_menu = QMenu("Captions listen to", menu)
        self.source_menu.aboutToShow.connect(self.fill_source_menu)
        self._source = ("mic", "")
        for action in (self.start_action, self.captions_action):
            menu.addAction(action)
        menu.addMenu(self.source_menu)
        menu.addAction(self.paste_last_action)
        menu.addMenu(self.microphone_menu)
        menu.addAction(self.language_action)
        for action in (show_action, quit_action):
            menu.addAction(action)
        self._menu = menu
        self.icon.setContextMenu(menu)
        self.icon.activated.connect(self._on_activated)

    def show(self) -> bool:
        """Shows the icon where the desktop has a tray; False where it has none."""
        if not QSystemTrayIcon.isSystemTrayAvailable():
            log.info("no system tray on this desktop; the tray icon is skipped")
            return False
        self.icon.show()
        return True

    def set_running(self, running: bool, talking: bool = False) -> None:
        self.start_action.setText("Stop" if running else "Start")
        self.icon.setIcon(self._recording_icon if talking else self._idle_icon)

    def set_microphones(self, names: list[str], current: str) -> None:
        """The microphone submenu: the system default, then each device; ``current`` checked
        (by name: "" is the default)."""
        self.microphone_menu.clear()
        group = QActionGroup(self.microphone_menu)
        for label, name in [("System default", ""), *[(n, n) for n in names]]:
            action = QAction(label, self.microphone_menu)
            action.setCheckable(True)
            action.setChecked(name == current)
            action.triggered.connect(lambda _=False, n=name: emit(self.microphone_chosen, n))
            group.addAction(action)
            self.microphone_menu.addAction(action)
        if current and current not in names:  # remembered, but not connected now
            missing = QAction(f"{current} (not connected)", self.microphone_menu)
            missing.setEnabled(False)
            self.microphone_menu.addAction(missing)

    def set_language_text(self, text: str, can_cycle: bool) -> None:
        self.language_action.setText(f"Language: {text}")
        self.language_action.setEnabled(can_cycle)

    def set_caption_source(self, source: str, app: str = "") -> None:
        self._source = (source, app)

    def fill_source_menu(self) -> None:
        """The sources, the current one checked; one entry per app playing sound now."""
        menu = self.source_menu
        menu.clear()
        group = QActionGroup(menu)
        entries = [(value, "", name) for value, name in CAPTION_SOURCES]
        apps = sorted(set(self._playing_apps()) | ({self._source[1]} if self._source[1] else set()))
        entries[2:2] = [("app", app, f"App: {app}") for app in apps]
        for value, app, name in entries:
            action = QAction(name, menu)
            action.setCheckable(True)
            action.setChecked((value, app) == self._source)
            action.triggered.connect(lambda _c=False, v=value, a=app: self._choose(v, a))
            group.addAction(action)
            menu.addAction(action)
        if not apps:
            none = QAction("(no app is playing sound)", menu)
            none.setEnabled(False)
            menu.insertAction(menu.actions()[2], none)

    def _choose(self, source: str, app: str) -> None:
        self._source = (source, app)
        emit(self.caption_source_chosen, source, app)

    def set_captions_checked(self, checked: bool) -> None:
        self.captions_action.blockSignals(True)
        self.captions_action.setChecked(checked)
        self.captions_action.blockSignals(False)

    def _on_activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason == QSystemTrayIcon.ActivationReason.Trigger:
            emit(self.show_window_requested)
