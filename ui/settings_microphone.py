"""Settings > Microphone: the microphones with a live level meter and a short test. What it needs
of the machine comes through `MicrophoneService` (app.setup_services implements it), whose
calls back from its own threads arrive through the page's signals, on the GUI thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

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
