"""The settings dialog's setup pages: Microphone, Models and Languages.

The pages only show and forward: what they need from the machine (the microphones and their
level, the model catalogue and downloads) comes through the small service protocols below,
which the app implements (app.setup_services). Services call back from their own threads
through the page's signals, so every widget is touched on the GUI thread only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ui.hotkey_edit import HotkeyEdit
from ui.settings_pages import FieldValue

LEVEL_FLOOR_DB = -60.0


# -- Microphone ----------------------------------------------------------------------------------

class MicrophoneService(Protocol):
    def devices(self) -> list[tuple[str, bool]]:
        """(name, is the system default) of each microphone."""
        ...

    def open_meter(self, name: str) -> None:
        """Start measuring microphone ``name`` ("": the default); closes the one before."""
        ...

    def level_db(self) -> float | None:
        """The latest level of the measured microphone (None: none yet, or it failed)."""
        ...

    def close_meter(self) -> None: ...

    def start_test(self, name: str, seconds: float, report: Callable[[str, bool], None]) -> None:
        """Record ``seconds`` from ``name`` and play it back; ``report(text, done)`` from any
        thread along the way."""
        ...


class MicrophonePage(QWidget):
    """The microphones by name, a live level meter beside the selected one, and a test that
    records 3 s and plays them back. The choice is kept by name; "" is the system default."""

    _reported = Signal(str, bool)
    TEST_SECONDS = 3.0

    def __init__(self, current: str, service: MicrophoneService,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._service = service
        self.devices = QListWidget()
        self.devices.setObjectName("microphoneList")
        self.level = self._meter()
        self._metered: QListWidgetItem | None = None
        self.test_button = QPushButton(f"Test: record {self.TEST_SECONDS:.0f} s and play back")
        self.test_button.clicked.connect(self._test)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        self.status = QLabel()
        self.status.setWordWrap(True)
        note = QLabel("Sottovoce remembers the microphone by its name: when it is unplugged, "
                      "the system default takes over (you are told) until it is back.")
        note.setWordWrap(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.test_button)
        buttons.addWidget(self.refresh_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Record from:"))
        layout.addWidget(self.devices, 1)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        layout.addWidget(note)
        self._chosen = current
        self._timer = QTimer(self)
        self._timer.setInterval(50)
        self._timer.timeout.connect(self._poll)
        self._reported.connect(self._on_report)
        self.devices.currentItemChanged.connect(self._on_selected)
        self.refresh()

    @staticmethod
    def _meter() -> QProgressBar:
        level = QProgressBar()
        level.setObjectName("microphoneLevel")
        level.setRange(0, int(-LEVEL_FLOOR_DB))
        level.setTextVisible(False)
        level.setFixedSize(180, 12)
        level.setToolTip("this microphone's level, live")
        return level

    def _place_meter(self, item: QListWidgetItem | None) -> None:
        """The level meter sits at the right end of the selected microphone's row."""
        if self._metered is not None and self.devices.row(self._metered) >= 0:
            self.devices.removeItemWidget(self._metered)  # (deletes the old meter)
        self._metered = item
        self.level = self._meter()
        if item is None:
            return
        holder = QWidget()
        row = QHBoxLayout(holder)
        row.setContentsMargins(0, 0, 8, 0)
        row.addStretch(1)
        row.addWidget(self.level)
        self.devices.setItemWidget(item, holder)

    def refresh(self) -> None:
        """List the microphones again (one was plugged in or out)."""
        chosen = self._chosen
        self.devices.blockSignals(True)
        self._metered = None
        self.devices.clear()
        default_item = QListWidgetItem("System default")
        default_item.setData(Qt.ItemDataRole.UserRole, "")
        self.devices.addItem(default_item)
        names = []
        for name, is_default in self._service.devices():
            item = QListWidgetItem(name + ("  (current default)" if is_default else ""))
            item.setData(Qt.ItemDataRole.UserRole, name)
            self.devices.addItem(item)
            names.append(name)
        if chosen and chosen not in names:
            item = QListWidgetItem(f"{chosen}  (not connected: the default is used)")
            item.setData(Qt.ItemDataRole.UserRole, chosen)
            item.setForeground(Qt.GlobalColor.gray)
            self.devices.addItem(item)
        for row in range(self.devices.count()):
            if self.devices.item(row).data(Qt.ItemDataRole.UserRole) == chosen:
                self.devices.setCurrentRow(row)
        self.devices.blockSignals(False)
        self._place_meter(self.devices.currentItem())
        if self.isVisible():
            self._service.open_meter(chosen)

    def chosen(self) -> str:
        return self._chosen

    def select(self, name: str) -> None:
        for row in range(self.devices.count()):
            if self.devices.item(row).data(Qt.ItemDataRole.UserRole) == name:
                self.devices.setCurrentRow(row)
                return
        raise ValueError(f"no microphone {name!r} in the list")

    def _on_selected(self, item: QListWidgetItem | None, _previous: object) -> None:
        if item is None:
            return
        self._chosen = str(item.data(Qt.ItemDataRole.UserRole))
        self._place_meter(item)
        if self.isVisible():
            self._service.open_meter(self._chosen)  # the meter follows the selection at once

    def showEvent(self, event: object) -> None:  # noqa: N802 - Qt override
        self._service.open_meter(self._chosen)
        self._timer.start()

    def hideEvent(self, event: object) -> None:  # noqa: N802 - Qt override
        self._timer.stop()
        self._service.close_meter()

    def _poll(self) -> None:
        level = self._service.level_db()
        self.level.setValue(0 if level is None else int(max(0.0, level - LEVEL_FLOOR_DB)))

    def _test(self) -> None:
        self.test_button.setEnabled(False)
        self._service.start_test(self._chosen, self.TEST_SECONDS, self._reported.emit)

    def _on_report(self, text: str, done: bool) -> None:
        self.status.setText(text)
        if done:
            self.test_button.setEnabled(True)

    def values(self) -> dict[str, FieldValue]:
        return {"input_device": self._chosen}


# -- Models --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelRow:
    """One line of the model table, in words."""

    name: str
    size: str
    languages: str
    status: str  # "bundled", "downloaded", "local folder", "not downloaded", "downloading…"
    note: str
    recommended: bool
    english_only: bool
    usable: bool  # can be used now (no download needed)
    removable: bool


class ModelService(Protocol):
    def rows(self, folders: tuple[str, ...]) -> list[ModelRow]: ...

    def recommendation(self) -> str:
        """The machine and the model that suits it, in a sentence."""
        ...

    def download(self, name: str, progress: Callable[[str, int, int, str], None],
                 done: Callable[[str, str, bool], None]) -> None:
        """Start downloading ``name``; ``progress(name, done, total, text)`` and
        ``done(name, message, ok)`` come from the download's thread."""
        ...

    def cancel(self, name: str) -> None: ...

    def remove(self, name: str) -> str:
        """Delete a downloaded model; the message says how much space was freed. Raises
        ValueError with the reason when it cannot."""
        ...

    def check_folder(self, path: str) -> None:
        """Raise ValueError unless ``path`` holds a CTranslate2 Whisper model."""
        ...


COLUMNS = ("Model", "Size", "Languages", "Status", "Note")


class ModelsPage(QWidget):
    """The catalogue with sizes, languages, what is here and what suits this machine;
    download (progress, cancel), remove, add a local folder, and choose the model to use."""

    model_chosen = Signal(str)  # the model in use changed (the Languages page follows)
    _progress = Signal(str, int, int, str)
    _done = Signal(str, str, bool)

    def __init__(self, current: str, folders: str, service: ModelService,
                 parent: QWidget | None = None, compute_type: str = "auto") -> None:
        super().__init__(parent)
        self._service = service
        self.compute_type = compute_type_box(compute_type)
        self._current = current
        self._folders = tuple(line.strip() for line in folders.splitlines() if line.strip())
        self._downloading: str | None = None
        self._rows: list[ModelRow] = []
        self.recommendation = QLabel(service.recommendation())
        self.recommendation.setWordWrap(True)
        self.recommendation.setObjectName("modelRecommendation")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("modelTable")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.use_button = QPushButton("Use this model")
        self.download_button = QPushButton("Download")
        self.cancel_button = QPushButton("Cancel download")
        self.remove_button = QPushButton("Remove")
        self.add_button = QPushButton("Add a model folder…")
        self.use_button.clicked.connect(self._use)
        self.download_button.clicked.connect(self._download)
        self.cancel_button.clicked.connect(self._cancel)
        self.remove_button.clicked.connect(self._remove)
        self.add_button.clicked.connect(self._add_dialog)
        self.progress = QProgressBar()
        self.progress.setObjectName("downloadProgress")
        self.progress.setFormat("%p%")
        self.progress.hide()
        self.progress_text = QLabel()
        self.in_use = QLabel()
        self.status = QLabel()
        self.status.setWordWrap(True)
        buttons = QHBoxLayout()
        for button in (self.use_button, self.download_button, self.cancel_button,
                       self.remove_button, self.add_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.recommendation)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        layout.addWidget(self.progress)
        layout.addWidget(self.progress_text)
        layout.addWidget(self.in_use)
        layout.addWidget(self.compute_type)
        layout.addWidget(self.status)
        self._progress.connect(self._on_progress)
        self._done.connect(self._on_done)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.refresh()

    # -- state ----------------------------------------------------------------------------------
    def refresh(self) -> None:
        selected = self.selected()
        self._rows = self._service.rows(self._folders)
        self.table.setRowCount(len(self._rows))
        bold = QFont(self.font())
        bold.setBold(True)
        for r, row in enumerate(self._rows):
            status = "downloading…" if row.name == self._downloading else row.status
            if row.name == self._current:
                status += " · in use"
            note = row.note + ("  ★ recommended here" if row.recommended else "")
            for c, text in enumerate((row.name, row.size, row.languages, status, note)):
                item = QTableWidgetItem(text)
                if row.name == self._current:
                    item.setFont(bold)
                self.table.setItem(r, c, item)
        self.in_use.setText(f"In use: {self._current} (switching reloads the model in a few "
                            "seconds; the app keeps running)")
        if selected is not None:
            self.select(selected)
        self._update_buttons()

    def selected(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        return self._rows[rows[0].row()].name if rows else None

    def select(self, name: str) -> None:
        for r, row in enumerate(self._rows):
            if row.name == name:
                self.table.selectRow(r)
                return
        raise ValueError(f"no model {name!r} in the table")

    def row(self, name: str) -> ModelRow:
        return next(r for r in self._rows if r.name == name)

    def current(self) -> str:
        return self._current

    def _update_buttons(self) -> None:
        name = self.selected()
        row = self.row(name) if name is not None else None
        busy = self._downloading is not None
        self.use_button.setEnabled(row is not None and row.usable and name != self._current)
        self.download_button.setEnabled(row is not None and not row.usable and not busy)
        self.cancel_button.setVisible(busy)
        self.remove_button.setEnabled(row is not None and row.removable and not busy
                                      and name != self._downloading)

    # -- actions --------------------------------------------------------------------------------
    def _use(self) -> None:
        name = self.selected()
        if name is not None:
            self.use(name)

    def use(self, name: str) -> None:
        if not self.row(name).usable:
            raise ValueError(f"{name} is not downloaded")
        self._current = name
        self.status.setText(f"{name} will be used once you press Save.")
        self.model_chosen.emit(name)
        self.refresh()

    def _download(self) -> None:
        name = self.selected()
        if name is not None:
            self.download(name)

    def download(self, name: str) -> None:
        self._downloading = name
        self.progress.setValue(0)
        self.progress.show()
        self.progress_text.setText(f"Starting the download of {name}…")
        self.refresh()
        self._service.download(name, self._progress.emit, self._done.emit)

    def _cancel(self) -> None:
        if self._downloading is not None:
            self._service.cancel(self._downloading)
            self.progress_text.setText("Cancelling…")

    def _on_progress(self, name: str, done: int, total: int, text: str) -> None:
        self.progress.setRange(0, 1000)
        self.progress.setValue(int(1000 * done / total) if total else 0)
        self.progress_text.setText(f"{name}: {text}")

    def _on_done(self, name: str, message: str, ok: bool) -> None:
        self._downloading = None
        self.progress.setVisible(ok)
        if ok:
            self.progress.setValue(self.progress.maximum())
        self.progress_text.setText(message)
        self.refresh()

    def _remove(self) -> None:
        name = self.selected()
        if name is not None:
            self.remove(name)

    def remove(self, name: str) -> None:
        row = self.row(name)
        if row.status == "local folder":
            self._folders = tuple(f for f in self._folders if f != name)
            self.status.setText(f"{name} is no longer listed (its files are left as they are).")
        else:
            try:
                self.status.setText(self._service.remove(name))
            except ValueError as exc:
                self.status.setText(str(exc))
                return
        if name == self._current:
            self._current = "tiny.en"
            self.model_chosen.emit(self._current)
        self.refresh()

    def _add_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "A CTranslate2 Whisper model folder")
        if path:
            self.add_folder(path)

    def add_folder(self, path: str) -> bool:
        try:
            self._service.check_folder(path)
        except ValueError as exc:
            self.status.setText(str(exc))
            return False
        if path not in self._folders:
            self._folders = (*self._folders, path)
        self.status.setText(f"Added {path}")
        self.refresh()
        return True

    def values(self) -> dict[str, FieldValue]:
        return {"model": self._current, "model_dirs": "\n".join(self._folders),
                "compute_type": str(self.compute_type.currentData())}


def compute_type_box(current: str) -> QComboBox:
    """CTranslate2's compute type: "auto" names the one measured best for this processor's
    kernels (engine.compute_choice); the others override it."""
    from engine.compute_choice import choose_compute_type, kernel_set, this_processor

    kernels = kernel_set(this_processor())
    box = QComboBox()
    box.setObjectName("computeType")
    box.addItem(f"Compute type: auto (measured best here: "
                f"{choose_compute_type(kernels)[0]} on {kernels})", "auto")
    for name in dict.fromkeys(("int8", "int16", "float32", "float16", "int8_float16", current)):
        if name != "auto":
            box.addItem(f"Compute type: {name}", name)
    box.setCurrentIndex(max(0, box.findData(current)))
    return box


# -- Languages -----------------------------------------------------------------------------------

class LanguagesPage(QWidget):
    """Whisper's languages by name; the user ticks the ones they speak (auto-detect then
    chooses among them only), picks the language now, and the hotkey that cycles them. An
    English-only model greys the list out and says so."""

    def __init__(self, languages: dict[str, str], spoken: tuple[str, ...], current: str,
                 hotkey: HotkeyEdit, english_only: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._names = languages
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Find a language…")
        self.filter.textChanged.connect(self._filter)
        self.list = QListWidget()
        self.list.setObjectName("languageList")
        ordered = [c for c in spoken if c in languages] + [c for c in languages if c not in spoken]
        for code in ordered:
            item = QListWidgetItem(f"{languages[code]} ({code})")
            item.setData(Qt.ItemDataRole.UserRole, code)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if code in spoken
                               else Qt.CheckState.Unchecked)
            self.list.addItem(item)
        self.list.itemChanged.connect(lambda _item: self._fill_current(self.current()))
        self.current_box = QComboBox()
        self.current_box.setObjectName("currentLanguage")
        self.hotkey = hotkey
        self.english_note = QLabel()
        self.english_note.setWordWrap(True)
        self.english_note.setObjectName("englishOnlyNote")
        self.help = QLabel("Tick the languages you speak. Auto-detect then chooses among them "
                           "only, so a short phrase is not taken for a language you never use. "
                           "None ticked: any of Whisper's languages.")
        self.help.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Language now", self.current_box)
        form.addRow("Hotkey to switch to the next language", self.hotkey)
        layout = QVBoxLayout(self)
        layout.addWidget(self.english_note)
        layout.addWidget(self.help)
        layout.addWidget(self.filter)
        layout.addWidget(self.list, 1)
        layout.addLayout(form)
        self._fill_current(current)
        self.set_english_only(english_only)

    def spoken(self) -> tuple[str, ...]:
        return tuple(str(self.list.item(i).data(Qt.ItemDataRole.UserRole))
                     for i in range(self.list.count())
                     if self.list.item(i).checkState() == Qt.CheckState.Checked)

    def tick(self, code: str, on: bool = True) -> None:
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(Qt.ItemDataRole.UserRole) == code:
                item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
                return
        raise ValueError(f"unknown language {code!r}")

    def current(self) -> str:
        return str(self.current_box.currentData() or "")

    def set_current(self, code: str) -> None:
        index = self.current_box.findData(code)
        if index < 0:
            raise ValueError(f"{code!r} is not one of the languages ticked")
        self.current_box.setCurrentIndex(index)

    def _fill_current(self, current: str) -> None:
        spoken = self.spoken()
        self.current_box.clear()
        self.current_box.addItem("Auto-detect" + (f" among {len(spoken)}" if spoken else ""), "")
        for code in spoken or tuple(self._names):
            self.current_box.addItem(self._names[code], code)
        index = self.current_box.findData(current)
        self.current_box.setCurrentIndex(max(index, 0))

    def set_english_only(self, english_only: bool, model: str = "") -> None:
        """An English-only model: the list is greyed out and the page says why."""
        for widget in (self.list, self.filter, self.current_box, self.hotkey):
            widget.setEnabled(not english_only)
        self.english_note.setVisible(english_only)
        self.english_note.setText(
            f"{model or 'This model'} is English-only: it transcribes English whatever is "
            "ticked here. Choose a multilingual model (without “.en”) on the Models page to use "
            "other languages.")

    def _filter(self, text: str) -> None:
        for i in range(self.list.count()):
            item = self.list.item(i)
            item.setHidden(text.lower() not in item.text().lower())

    def values(self) -> dict[str, FieldValue]:
        return {"languages": ", ".join(self.spoken()), "language": self.current(),
                "language_hotkey": self.hotkey.hotkey()}
