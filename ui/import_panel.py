"""The bar shown while a file is imported: file name, audio time done / total, ETA, Cancel.

It only renders progress and forwards the Cancel click; app.controller runs the import. The ETA
assumes the rest of the file decodes at the speed seen so far (silence is skipped, so it is an
estimate, not a promise).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from engine.types import SAMPLE_RATE
from ui.qt_compat import forwarder

TICKS_PER_SECOND = 10  # the bar counts tenths of a second of audio (fits an int for 50 days)


def format_duration(seconds: float) -> str:
    """m:ss, or h:mm:ss from an hour on."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def eta_seconds(done: int, total: int, elapsed_s: float) -> float | None:
    """Seconds left at the speed so far; None until some audio is done."""
    if done <= 0 or elapsed_s <= 0:
        return None
    return elapsed_s * (total - done) / done


class ImportPanel(QWidget):
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(parent)
        self.setObjectName("importPanel")
        self._clock = clock
        self._started_at = 0.0
        self._name = ""
        self.label = QLabel()
        self.bar = QProgressBar()
        self.bar.setObjectName("importProgress")
        self.bar.setTextVisible(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("importCancel")
        self.cancel_button.clicked.connect(self._on_cancel)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.label)
        row.addWidget(self.bar, 1)
        row.addWidget(self.cancel_button)
        self.cancel_button.clicked.connect(forwarder(self.cancel_requested, 0))
        self.hide()

    def begin(self, name: str) -> None:
        """Show the panel for `name` (busy until the file is decoded and the model loaded)."""
        self._name = name
        self.bar.setRange(0, 0)
        self.label.setText(f"Opening {name}…")
        self.cancel_button.setEnabled(True)
        self.cancel_button.setText("Cancel")
        self.show()

    def set_total(self, total_samples: int) -> None:
        self._started_at = self._clock()
        self.bar.setRange(0, max(1, total_samples * TICKS_PER_SECOND // SAMPLE_RATE))
        self.set_progress(0, total_samples)

    def set_progress(self, done_samples: int, total_samples: int) -> None:
        self.bar.setValue(done_samples * TICKS_PER_SECOND // SAMPLE_RATE)
        done_s, total_s = done_samples / SAMPLE_RATE, total_samples / SAMPLE_RATE
        text = f"Transcribing {self._name}: {format_duration(done_s)} / {format_duration(total_s)}"
        eta = eta_seconds(done_samples, total_samples, self._clock() - self._started_at)
        if eta is not None and done_samples < total_samples:
            text += f" · about {format_duration(eta)} left"
        self.label.setText(text)

    def end(self) -> None:
        self.hide()

    def _on_cancel(self) -> None:
        # Cancelling waits for the batch in flight; say so instead of looking stuck.
        self.cancel_button.setEnabled(False)
        self.cancel_button.setText("Cancelling…")
