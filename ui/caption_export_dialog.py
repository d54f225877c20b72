"""Export a saved session (History > Export…): the format, whether to keep source labels and
timestamps, and an optional time range. The app renders and writes the file."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QWidget,
)

from engine.wire.export import FORMATS as EXPORT_FORMATS


@dataclass(frozen=True)
class ExportChoice:
    fmt: str
    labels: bool
    timestamps: bool
    start: float | None  # seconds from the session's start; None: from the beginning
    end: float | None


class CaptionExportDialog(QDialog):
    """``duration``: the session's length in seconds (the range's upper bound)."""

    def __init__(self, duration: float, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("captionExportDialog")
        self.setWindowTitle("Export session")
        self.format = QComboBox()
        self.format.addItems([f.upper() for f in EXPORT_FORMATS])
        self.labels = QCheckBox("Source labels (You: / Them:)")
        self.labels.setChecked(True)
        self.timestamps = QCheckBox("Timestamps (TXT, JSON; subtitles always have them)")
        self.timestamps.setChecked(True)
        self.start = QDoubleSpinBox()
        self.end = QDoubleSpinBox()
        for box, value in ((self.start, 0.0), (self.end, duration)):
            box.setRange(0.0, max(duration, 0.0))
            box.setDecimals(1)
            box.setSuffix(" s")
            box.setValue(value)
        self._duration = duration
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        for label, widget in (("Format", self.format), ("", self.labels), ("", self.timestamps),
                              ("From", self.start), ("To", self.end)):
            form.addRow(label, widget)
        form.addRow(buttons)

    def choice(self) -> ExportChoice:
        start, end = self.start.value(), self.end.value()
        return ExportChoice(
            fmt=self.format.currentText().lower(), labels=self.labels.isChecked(),
            timestamps=self.timestamps.isChecked(), start=start if start > 0 else None,
            end=end if end < self._duration else None)
