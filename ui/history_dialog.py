"""History: past sessions from the autosave journal; one can be reopened in the main window
(to read, copy or export it)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from ui.qt_compat import emit


class HistoryDialog(QDialog):
    """`sessions` maps a label to (path, preview text); reopen emits the path."""

    reopen_requested = Signal(object)  # Path

    def __init__(self, sessions: list[tuple[str, Path, str]],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("historyDialog")
        self.setWindowTitle("Sottovoce history")
        self.resize(760, 440)
        self.list = QListWidget()
        self.preview = QPlainTextEdit()
        self.preview.setReadOnly(True)
        for label, path, text in sessions:
            item = QListWidgetItem(label)
            item.setData(Qt.ItemDataRole.UserRole, (path, text))
            self.list.addItem(item)
        if not sessions:
            self.preview.setPlainText("No saved sessions yet. Dictated text is saved "
                                      "automatically as you go.")
        self.list.currentItemChanged.connect(self._show_preview)
        self.list.itemDoubleClicked.connect(lambda _item: self._reopen())
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.open_button = buttons.addButton("Open", QDialogButtonBox.ButtonRole.AcceptRole)
        self.open_button.setEnabled(bool(sessions))
        buttons.accepted.connect(self._reopen)
        buttons.rejected.connect(self.reject)
        panes = QHBoxLayout()
        panes.addWidget(self.list, 1)
        panes.addWidget(self.preview, 2)
        layout = QVBoxLayout(self)
        layout.addLayout(panes)
        layout.addWidget(buttons)
        if sessions:
            self.list.setCurrentRow(0)

    def _show_preview(self, item: QListWidgetItem | None) -> None:
        if item is not None:
            self.preview.setPlainText(item.data(Qt.ItemDataRole.UserRole)[1])

    def _reopen(self) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        emit(self.reopen_requested, item.data(Qt.ItemDataRole.UserRole)[0])
        self.accept()
