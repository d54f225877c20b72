"""The settings dialog's setup pages: Models here; Microphone in `ui.settings_microphone`,
Languages in `ui.settings_languages`.

The pages only show and forward: what they need from the machine (the microphones and their
level, the model catalogue and downloads) comes through the small service protocols below,
which the app implements (app.setup_services). Services call back from their own threads
through the page's signals, so every widget is touched on the GUI thread only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from PySide6.QtCore import Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ui.settings_pages import FieldValue

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
