"""The settings dialog's "AI polish" page: the user's own OpenAI-compatible LLM server (URL,
model, API key for the keyring), the instruction, the time budget, the voice-edit hotkey and a
"Test connection" button.

The page does no network itself (ui/ has no engine code): the button emits `test_requested`
(url, model, key typed or ""), the app runs the check on a worker thread and calls
`show_test_result` with its one line.
"""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QWidget,
)

from ui.qt_compat import emit

FieldValue = str | int | float | bool

PRESET_LABELS = {"clean": "clean up (fillers, false starts, punctuation)",
                 "message": "message", "email": "e-mail", "list": "notes as a list",
                 "custom": "custom instruction"}


class PolishSettings(Protocol):
    """The fields this page shows (read-only)."""

    @property
    def polish(self) -> bool: ...
    @property
    def polish_url(self) -> str: ...
    @property
    def polish_model(self) -> str: ...
    @property
    def polish_preset(self) -> str: ...
    @property
    def polish_custom(self) -> str: ...
    @property
    def polish_budget_s(self) -> float: ...
    @property
    def command_hotkey(self) -> str: ...


class PolishPage(QWidget):
    test_requested = Signal(str, str, str)  # url, model, API key typed ("": the stored one)

    def __init__(self, settings: PolishSettings, presets: tuple[str, ...],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("polishPage")
        self.enabled = QCheckBox("Polish dictated text with my LLM server before inserting it")
        self.enabled.setChecked(settings.polish)
        self.url = QLineEdit(settings.polish_url)
        self.url.setPlaceholderText("http://127.0.0.1:11434/v1")
        self.model = QLineEdit(settings.polish_model)
        self.model.setPlaceholderText("e.g. llama3.2:3b")
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("unchanged (kept in the system keyring; none needed "
                                        "for a local server)")
        self.preset = QComboBox()
        for name in presets:
            self.preset.addItem(PRESET_LABELS.get(name, name), name)
        self.preset.setCurrentIndex(max(0, presets.index(settings.polish_preset)
                                        if settings.polish_preset in presets else 0))
        self.custom = QPlainTextEdit(settings.polish_custom)
        self.custom.setPlaceholderText("your own instruction, e.g. \"Rewrite in plain English\"")
        self.custom.setMaximumHeight(70)
        self.budget = QDoubleSpinBox()
        self.budget.setRange(0.2, 30.0)
        self.budget.setSingleStep(0.5)
        self.budget.setSuffix(" s")
        self.budget.setValue(settings.polish_budget_s)
        self.command_hotkey = QLineEdit(settings.command_hotkey)
        self.command_hotkey.setPlaceholderText("off")
        self.test_button = QPushButton("Test connection")
        self.test_button.setObjectName("polishTest")
        self.test_result = QLabel()
        self.test_result.setObjectName("polishTestResult")
        self.test_result.setWordWrap(True)
        self.test_button.clicked.connect(self._test)
        note = QLabel("Only final texts are polished. The dictation is sent as text to rewrite, "
                      "never as instructions; an answer that is not a rewrite of it, or comes "
                      "later than the time limit, is discarded and the raw text inserted. "
                      "Per-application profiles choose another instruction with "
                      "polish=email (or off, clean, message, list, custom).")
        note.setWordWrap(True)
        form = QFormLayout(self)
        form.addRow(self.enabled)
        form.addRow("Server URL (OpenAI-compatible)", self.url)
        form.addRow("Model", self.model)
        form.addRow("API key", self.api_key)
        form.addRow(self.test_button, self.test_result)
        form.addRow("Instruction", self.preset)
        form.addRow("Custom instruction", self.custom)
        form.addRow("Time limit (then the raw text)", self.budget)
        form.addRow("Voice edit of the selection: hold", self.command_hotkey)
        form.addRow(note)

    def _test(self) -> None:
        self.test_result.setText("Testing…")
        emit(self.test_requested, self.url.text().strip(), self.model.text().strip(),
             self.api_key.text())

    def show_test_result(self, line: str) -> None:
        self.test_result.setText(line)

    def new_api_key(self) -> str | None:
        """The key typed in, or None to leave the stored one alone."""
        return self.api_key.text() or None

    def values(self) -> dict[str, FieldValue]:
        return {"polish": self.enabled.isChecked(), "polish_url": self.url.text().strip(),
                "polish_model": self.model.text().strip(),
                "polish_preset": str(self.preset.currentData()),
                "polish_custom": self.custom.toPlainText().strip(),
                "polish_budget_s": round(self.budget.value(), 2),
                "command_hotkey": self.command_hotkey.text().strip()}
