"""Main window: transcript, start/stop, input level, engine selectors, latency meter, status line,
and the file-import bar (File > Open file…).

It only renders and forwards intent (signals); app.controller decides what happens. Nothing here
waits on the engine: loading shows a busy bar until the engine reports "ready".
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMenu,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.wire.export import FORMATS as EXPORT_FORMATS
from ui.import_panel import ImportPanel
from ui.latency_meter import LatencyMeter
from ui.qt_compat import emit, forwarder
from ui.transcript_view import TranscriptView

LANGUAGES = ("", "en", "de", "es", "fr", "it", "ja", "nl", "pl", "pt", "ru", "uk", "zh")  # until
# the controller's set_languages gives the user's own (the Languages page of the settings)
MODELS = ("tiny.en", "base")
LEVEL_FLOOR_DB = -60.0


@dataclass(frozen=True)
class EngineChoice:
    """What the selector row says the engine should be."""

    backend: str
    remote_url: str
    model: str
    device: str
    language: str


class MainWindow(QMainWindow):
    start_requested = Signal()
    stop_requested = Signal()
    engine_choice_changed = Signal(object)  # EngineChoice
    export_requested = Signal(str)  # "txt" | "srt" | "vtt" | "json"
    open_file_requested = Signal()
    file_dropped = Signal(str)  # a local file dropped on the window: import it
    import_cancel_requested = Signal()
    copy_all_requested = Signal()
    copy_selection_requested = Signal()
    captions_toggled = Signal(bool)
    history_requested = Signal()
    settings_requested = Signal()
    hint_dismissed = Signal()
    quit_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mainWindow")
        self.setWindowTitle("Sottovoce")
        self.resize(900, 560)
        self.running = False
        self.quit_on_close = True
        self.transcript = TranscriptView()
        self.latency = LatencyMeter()
        self.import_panel = ImportPanel()
        self.import_panel.cancel_requested.connect(forwarder(self.import_cancel_requested, 0))
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.addWidget(self._build_hint())
        layout.addLayout(self._build_controls())
        layout.addWidget(self.transcript, 1)
        layout.addWidget(self.import_panel)
        layout.addWidget(self.latency)
        self.setCentralWidget(central)
        self._build_menus()
        self._build_status()
        self.setAcceptDrops(True)
        self.set_state("stopped", "")

    # -- construction --------------------------------------------------------------------------
    def _build_hint(self) -> QWidget:
        self.hint = QWidget()
        self.hint.setObjectName("firstRunHint")
        row = QHBoxLayout(self.hint)
        self.hint_label = QLabel()
        self.hint_label.setWordWrap(True)
        got_it = QPushButton("Got it")
        got_it.clicked.connect(self._dismiss_hint)
        row.addWidget(self.hint_label, 1)
        row.addWidget(got_it)
        self.hint.hide()
        return self.hint

    def _build_controls(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.start_button = QPushButton("Start")
        self.start_button.setObjectName("startButton")
        self.start_button.clicked.connect(self._on_start_clicked)
        self.level = QProgressBar()
        self.level.setObjectName("levelMeter")
        self.level.setRange(0, int(-LEVEL_FLOOR_DB))
        self.level.setTextVisible(False)
        self.level.setFixedWidth(120)
        self.level.setToolTip("input level")
        self.backend_box = QComboBox()
        self.backend_box.addItems(["local", "remote"])
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("ws://server:8765 or whisperlive://server:9090")
        self.model_box = QComboBox()
        self.model_box.setEditable(True)
        self.model_box.addItems(list(MODELS))
        self.device_box = QComboBox()
        self.device_box.addItems(["auto", "cpu", "cuda"])
        self.language_box = QComboBox()
        for code in LANGUAGES:
            self.language_box.addItem(code or "auto-detect", code)
        for label, widget in (("", self.start_button), ("", self.level),
                              ("Backend", self.backend_box), ("", self.url_edit),
                              ("Model", self.model_box), ("Device", self.device_box),
                              ("Language", self.language_box)):
            if label:
                row.addWidget(QLabel(label))
            row.addWidget(widget)
        self.backend_box.currentTextChanged.connect(self._on_choice_edited)
        self.url_edit.editingFinished.connect(self._on_choice_edited)
        self.model_box.currentTextChanged.connect(self._on_choice_edited)
        self.device_box.currentTextChanged.connect(self._on_choice_edited)
        self.language_box.currentIndexChanged.connect(self._on_choice_edited)
        self._syncing = False
        return row

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.open_file_action = self._action(file_menu, "Open file…", "Ctrl+O",
                                             forwarder(self.open_file_requested, 0))
        file_menu.addSeparator()
        self.copy_all_action = self._action(file_menu, "Copy transcript", "Ctrl+Shift+C",
                                            forwarder(self.copy_all_requested, 0))
        self._action(file_menu, "Copy selection", "Ctrl+C", forwarder(self.copy_selection_requested, 0))
        save_menu = file_menu.addMenu("Save as")
        for fmt in EXPORT_FORMATS:
            self._action(save_menu, fmt.upper() + "…", None,
                         lambda _=False, f=fmt: emit(self.export_requested, f))
        file_menu.addSeparator()
        self._action(file_menu, "History…", "Ctrl+H", forwarder(self.history_requested, 0))
        self._action(file_menu, "Settings…", "Ctrl+,", forwarder(self.settings_requested, 0))
        file_menu.addSeparator()
        self._action(file_menu, "Quit", "Ctrl+Q", forwarder(self.quit_requested, 0))
        view_menu = self.menuBar().addMenu("&View")
        self.captions_action = self._action(view_menu, "Caption window", "Ctrl+K", None)
        self.captions_action.setCheckable(True)
        self.captions_action.toggled.connect(forwarder(self.captions_toggled, 1))

    def _action(self, menu: QMenu, text: str, shortcut: str | None, slot: object) -> QAction:
        action = QAction(text, self)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
        if slot is not None:
            action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _build_status(self) -> None:
        self.state_label = QLabel()
        self.state_label.setObjectName("stateLabel")
        self.model_label = QLabel("model —")
        self.model_label.setObjectName("modelLabel")
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)  # indeterminate: loading has no measurable progress
        self.busy.setFixedWidth(100)
        self.busy.hide()
        self.statusBar().addWidget(self.state_label, 1)
        self.statusBar().addPermanentWidget(self.busy)
        self.statusBar().addPermanentWidget(self.model_label)

    # -- inputs from the controller ------------------------------------------------------------
    def show_hint(self, hotkey: str) -> None:
        self.hint_label.setText(
            f"Welcome! Hold {hotkey} anywhere to dictate into the app you are typing in; "
            "release to insert the text. View → Caption window (Ctrl+K) shows live captions "
            "on top of everything.")
        self.hint.show()

    def set_choice(self, choice: EngineChoice) -> None:
        self._syncing = True
        try:
            self.backend_box.setCurrentText(choice.backend)
            self.url_edit.setText(choice.remote_url)
            self.model_box.setCurrentText(choice.model)
            self.device_box.setCurrentText(choice.device)
            index = self.language_box.findData(choice.language)
            self.language_box.setCurrentIndex(max(index, 0))
            self.url_edit.setEnabled(choice.backend == "remote")
        finally:
            self._syncing = False

    def choice(self) -> EngineChoice:
        return EngineChoice(
            backend=self.backend_box.currentText(), remote_url=self.url_edit.text().strip(),
            model=self.model_box.currentText().strip() or "tiny.en",
            device=self.device_box.currentText(),
            language="" if not self.language_box.isEnabled() else self.current_language())

    def set_state(self, state: str, detail: str) -> None:
        """Engine lifecycle: loading shows the busy bar; the button follows running/stopped."""
        self.running = state not in ("stopped", "failed")
        self.busy.setVisible(state in ("loading", "reconnecting"))
        self.start_button.setText("Stop" if self.running else "Start")
        text = state.capitalize() + (f": {detail}" if detail else "")
        if state == "stopped" and not self.open_file_action.isEnabled():
            text = "Paused while a file is transcribed"
        self.state_label.setText(text)
        if not self.running:
            self.level.setValue(0)

    def set_importing(self, importing: bool) -> None:
        """While a file is imported, live listening is paused: Start and Open are off."""
        self.start_button.setEnabled(not importing)
        self.open_file_action.setEnabled(not importing)
        if not self.running:
            self.state_label.setText("Paused while a file is transcribed" if importing
                                     else "Stopped")

    def set_languages(self, languages: list[tuple[str, str]], current: str,
                      english_only: bool) -> None:
        """The language selector: auto-detect and ``languages`` ((code, name): the ones the
        user speaks), ``current`` selected; an English-only model greys it out and says so."""
        self._syncing = True
        try:
            self.language_box.clear()
            if english_only:
                self.language_box.addItem("English (English-only model)", "en")
            else:
                self.language_box.addItem("Auto-detect", "")
                for code, name in languages:
                    self.language_box.addItem(name, code)
            index = self.language_box.findData("en" if english_only else current)
            if index < 0 and current:  # a language outside the list: still shown as current
                self.language_box.addItem(current, current)
                index = self.language_box.count() - 1
            self.language_box.setCurrentIndex(max(index, 0))
            self.language_box.setEnabled(not english_only)
            self.language_box.setToolTip("This model only knows English" if english_only
                                         else "The language spoken (auto-detect chooses among "
                                              "the languages ticked in Settings > Languages)")
        finally:
            self._syncing = False

    def set_models(self, names: list[str]) -> None:
        """The models that can be used now (bundled, downloaded, added folders)."""
        self._syncing = True
        try:
            current = self.model_box.currentText()
            self.model_box.clear()
            self.model_box.addItems(names)
            self.model_box.setCurrentText(current)
        finally:
            self._syncing = False

    def current_language(self) -> str:
        """The language shown in the selector ("" : auto-detect)."""
        return str(self.language_box.currentData() or "")

    def set_model_info(self, name: str, device: str, compute_type: str) -> None:
        self.model_label.setText(f"{name} · {device} · {compute_type}")

    def set_level(self, rms_db: float) -> None:
        self.level.setValue(int(max(0.0, rms_db - LEVEL_FLOOR_DB)))

    def show_message(self, text: str, timeout_ms: int = 8000) -> None:
        self.statusBar().showMessage(text, timeout_ms)

    # -- user intent ---------------------------------------------------------------------------
    def _on_start_clicked(self) -> None:
        if self.running:
            emit(self.stop_requested)
        else:
            emit(self.start_requested)

    def _on_choice_edited(self, *_: object) -> None:
        self.url_edit.setEnabled(self.backend_box.currentText() == "remote")
        if not self._syncing:
            emit(self.engine_choice_changed, self.choice())

    def _dismiss_hint(self) -> None:
        self.hint.hide()
        emit(self.hint_dismissed)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt override
        if _dropped_file(event) and self.open_file_action.isEnabled():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt override
        path = _dropped_file(event)
        if path and self.open_file_action.isEnabled():
            event.acceptProposedAction()
            emit(self.file_dropped, path)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        if self.quit_on_close:
            emit(self.quit_requested)
        event.accept()


def _dropped_file(event: QDropEvent | QDragEnterEvent) -> str | None:
    """The one local file being dragged, else None (several files or a web link: no)."""
    mime = event.mimeData()
    urls = mime.urls() if mime is not None and mime.hasUrls() else []
    if len(urls) != 1 or not urls[0].isLocalFile():
        return None
    return urls[0].toLocalFile() or None
